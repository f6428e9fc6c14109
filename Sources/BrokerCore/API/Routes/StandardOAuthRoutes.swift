import Foundation
import HTTPServer
import WireValues

/// The broker as an ordinary OAuth 2.0 authorization server for public clients with PKCE, one
/// issuer per provider (`<public_url>/providers/{provider}`), so that AppAuth, golang/oauth2,
/// authlib and the like work against it with a configuration change (docs/api.md, "Using a standard
/// OAuth client"): its RFC 8414 metadata and its authorization endpoint here, its token and
/// revocation endpoints in ``StandardTokenRoutes``. The client id is the app id; the provider
/// comes from the issuer's path, so the broker's own endpoints stay as they are.
struct StandardOAuthRoutes: Sendable {
    let config: BrokerConfig
    let signIns: SignInStart
    /// The grants of the standard token endpoint (``StandardTokenRoutes``), which the metadata names.
    let grants: GrantTypes
    let admission: Admission

    func register(in routes: inout RouteTable) {
        for provider in config.providers.map(\.id) {
            let issuer = config.issuer(of: provider)
            let metadata = Response.json(config.authorizationServerMetadata(of: provider, grantTypes: grants.types))
            // RFC 8414 §3: the well-known segment goes between the host and the issuer's path.
            routes.add("GET", "/.well-known/oauth-authorization-server/providers/\(provider)",
                       RoutePolicy(caller: .anyone, limit: .none(because: "a document made at start"), body: .none)) { _ in .now(metadata) }
            routes.add("GET", "/providers/\(provider)/authorize", admission.signInPolicy(.app, body: .none, page: AuthorizeRoutes.page)) {
                [self] request throws(HTTPError) in
                do throws(HTTPError) {
                    return try authorize(try request.query(), provider: provider, issuer: issuer)
                } catch {
                    // Before the client and its redirect URI are known good: answered here, as a
                    // page for a person at a browser.
                    guard request.wantsHTML else { throw error }
                    return .now(AuthorizeRoutes.page(error))
                }
            }
        }
    }

    /// RFC 6749 §4.1.1 with PKCE (RFC 7636, S256 only). Until the client and its redirect URI
    /// are known good, an error is answered here and never sent there (§4.1.2.1); after that,
    /// every error goes back to the app's redirect URI with `state` and `iss` (RFC 9207).
    private func authorize(_ query: FormFields, provider: String, issuer: String) throws(HTTPError) -> Reply {
        let clientID = try query.required("client_id")
        guard let app = config.app(id: clientID) else { throw .badRequest("Unknown client_id.") }
        let redirectURI = try query.required("redirect_uri")
        guard app.matchRegistered(redirectURI) != nil else { throw .badRequest("redirect_uri is not registered for this client.") }
        // The app's state goes back only if it is one the broker would keep (printable, bounded).
        let state = (try? query.optional("state")).flatMap { $0 }.flatMap { state in
            state.utf8.count <= 1024 && state.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) ? state : nil
        }
        let redirect = { @Sendable (error: String, description: String) -> Response in
            var parameters = [("error", error), ("error_description", description)]
            if let state { parameters.append(("state", state)) }
            parameters.append(("iss", issuer))
            return .redirect(to: FormFields.url(redirectURI, adding: parameters))
        }
        let refuse = { (error: String, description: String) -> Reply in .now(redirect(error, description)) }
        guard let responseType = try? query.optional("response_type") else {
            return refuse("invalid_request", "response_type=code is required.")
        }
        guard responseType == "code" else { return refuse("unsupported_response_type", "Only response_type=code is supported.") }
        guard (try? query.optional("code_challenge")) != nil else {
            return refuse("invalid_request", "code_challenge is required (PKCE with S256).")
        }
        guard query["code_challenge_method"] == "S256" else {
            return refuse("invalid_request", "code_challenge_method must be S256 (plain is not supported).")
        }
        do throws(HTTPError) {
            let login = try signIns.loginRequest(query, app: clientID, provider: provider, session: nil)
            // What cannot start now goes back to the app too (§4.1.2.1): `temporarily_unavailable`
            // for the ceiling of sign-ins under way or a provider out of reach, else `server_error`.
            return signIns.begin(login, route: "/providers/\(provider)/authorize", failure: { failure in
                redirect(failure.status == 503 ? "temporarily_unavailable" : "server_error", failure.description)
            }) { .redirect(to: $0) }
        } catch {
            return refuse(error.code, error.description)
        }
    }
}
