import BrokerCrypto
import Foundation
import HTTPServer
import Logging
import WireValues

/// `GET /session` describes the session, `GET /profile` says who the user is, and
/// `POST /revoke` ends the session at the provider and here.
struct SessionRoutes: Sendable {
    let services: BrokerServices

    func register(in router: inout Router) {
        router.add("GET", "/session") { [services] request throws(HTTPError) in
            let session = try services.authenticate(request)
            return .now(.json(.object([
                ("provider", .string(session.provider)),
                ("subject", .string(session.subject)),
                ("scopes", .array(session.scopes.map(JSONValue.string))),
                ("created_at", .string(Timestamp.format(seconds: Int(session.createdAt)))),
                ("access_token_expires_at", session.accessTokenExpiresAt.map { .string(Timestamp.format(seconds: Int($0))) } ?? .null),
                ("refreshable", .bool(session.refreshToken != nil)),
            ])))
        }
        router.add("POST", "/revoke") { [self] request throws(HTTPError) in try revoke(request) }
        router.add("GET", "/profile") { [self] request throws(HTTPError) in try profile(request) }
    }

    /// Deletes the session first (whatever the provider says next, it is gone here), then asks
    /// the provider to revoke the refresh token and the access token (RFC 7009). Idempotent: an
    /// unknown session token is answered 200 with `not_attempted`.
    private func revoke(_ request: Request) throws(HTTPError) -> Reply {
        let id = try services.sessionID(request)
        return .deferredCatching { [services] () async throws(HTTPError) -> Response in
            let removed = try await durably { () async throws(StateWriteError) in try await services.store.removeSession(id) }
            guard let session = removed else { return Self.revoked("not_attempted") }
            services.profiles.remove(id)
            return Self.revoked(await services.revokeAtProvider(session).rawValue)
        }
    }

    private static func revoked(_ outcome: String) -> Response {
        .json(.object([("revoked", .bool(true)), ("provider_revocation", .string(outcome))]))
    }

    /// The provider's profile, normalised, with a fresh access token; on a 401 from the provider
    /// the token is refreshed once and the call retried.
    private func profile(_ request: Request) throws(HTTPError) -> Reply {
        let session = try services.authenticate(request)
        if let cached = services.profiles.get(session.id, now: services.now()) { return .now(.json(cached)) }
        return .deferredCatching { [services] () async throws(HTTPError) -> Response in
            let provider = try await services.providers.provider(session.provider)
            guard let endpoint = provider.userinfoEndpoint else {
                guard let bytes = session.idTokenClaims, let claims = try? JSONValue.parse(bytes) else {
                    throw HTTPError(status: 404, code: "not_found", description: "This provider has no profile endpoint.")
                }
                return .json(Self.normalised(claims, provider))
            }
            let method = provider.config.userinfoMethod
            var current = try await services.refresher.session(session.id, force: false, minimumValidity: services.refreshSkew)
            var raw: JSONValue
            do throws(ProviderCallError) {
                raw = try await services.calls.userinfo(accessToken: current.accessToken, endpoint: endpoint, method: method, provider: provider.id)
            } catch {
                guard case .unauthorized = error else { throw error.httpError }
                // The provider no longer takes the token: refresh once and try again.
                current = try await services.refresher.session(session.id, force: true, minimumValidity: services.refreshSkew)
                do throws(ProviderCallError) {
                    raw = try await services.calls.userinfo(accessToken: current.accessToken, endpoint: endpoint, method: method, provider: provider.id)
                } catch {
                    throw error.httpError
                }
            }
            let profile = Self.normalised(raw, provider)
            services.profiles.put(session.id, profile, now: services.now())
            return .json(profile)
        }
    }

    /// `{sub, name, email, email_verified, picture, provider, raw}`.
    private static func normalised(_ raw: JSONValue, _ provider: Provider) -> JSONValue {
        let profile = provider.config.profileMapping.profile(from: raw)
        func text(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        return .object([
            ("sub", text(profile?.subject)),
            ("name", text(profile?.name)),
            ("email", text(profile?.email)),
            ("email_verified", profile?.emailVerified.map(JSONValue.bool) ?? .null),
            ("picture", text(profile?.picture)),
            ("provider", .string(provider.id)),
            ("raw", raw),
        ])
    }
}
