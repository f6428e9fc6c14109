import BrokerCrypto
import WireValues

/// Why `GET /profile` has no profile to give.
enum ProfileFailure: Error, Sendable {
    /// The provider has neither a profile endpoint nor ID-token claims for the session.
    case noProfile
    /// The provider's endpoints could not be had.
    case provider(ProviderLookupError)
    /// The session's token could not be refreshed.
    case refresh(RefreshFailure)
    /// The profile endpoint failed.
    case call(ProviderCallError)
}

extension SessionOperations {
    /// The profile cached for `session` (read with its present access token), without a call.
    func cachedProfile(of session: Session) -> JSONValue? {
        profiles.get(session, now: now())
    }

    /// The provider's profile of the session's user, normalised (`{sub, name, email,
    /// email_verified, picture, provider, raw}`), read with a fresh access token; on a 401 from
    /// the provider the token is refreshed once and the call retried. Without a profile
    /// endpoint, the session's ID-token claims. Cached for `sessions.profile_cache_seconds`.
    func profile(of session: Session) async throws(ProfileFailure) -> JSONValue {
        let provider: Provider
        do {
            provider = try await providers.resolve(session.provider)
        } catch {
            throw .provider(error)
        }
        guard let endpoint = provider.userinfoEndpoint else {
            guard let bytes = session.idTokenClaims, let claims = try? JSONValue.parse(bytes) else { throw .noProfile }
            return Self.normalised(claims, provider)
        }
        let method = provider.config.userinfoMethod
        var used: Session
        do {
            used = try await refresh(session.id, force: false, minimumValidity: refreshSkew)
        } catch {
            throw .refresh(error)
        }
        let raw: JSONValue
        do throws(ProviderCallError) {
            raw = try await calls.userinfo(accessToken: used.accessToken, endpoint: endpoint, method: method, provider: provider.id,
                                               key: used.providerProofKey)
        } catch {
            guard case .unauthorized = error else { throw .call(error) }
            // The provider no longer takes the token: another one, once, and try again.
            do {
                used = try await replacing(used.accessToken, in: session.id)
            } catch {
                throw .refresh(error)
            }
            do {
                raw = try await calls.userinfo(accessToken: used.accessToken, endpoint: endpoint, method: method, provider: provider.id,
                                               key: used.providerProofKey)
            } catch {
                throw .call(error)
            }
        }
        let profile = Self.normalised(raw, provider)
        profiles.put(used, profile, now: now())
        return profile
    }

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
