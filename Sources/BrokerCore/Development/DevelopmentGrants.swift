import BrokerCrypto
import Synchronization

/// The development provider's memory: authorization codes, access tokens and refresh tokens.
/// Refresh tokens rotate; a used one no longer works.
final class DevelopmentGrants: Sendable {
    struct Authorization: Sendable {
        let user: String
        let scopes: [String]
        let challenge: String
        let nonce: String?
        /// When the user signed in.
        let signedInAt: Double
        let expiresAt: Double
    }

    struct Holder: Sendable {
        let user: String
        let scopes: [String]
        let expiresAt: Double?
    }

    private struct State {
        var codes: [String: Authorization] = [:]
        var accessTokens: [String: Holder] = [:]
        var refreshTokens: [String: Holder] = [:]
    }

    private let state = Mutex(State())

    func addCode(_ code: String, _ authorization: Authorization) {
        state.withLock { $0.codes[code] = authorization }
    }

    func takeCode(_ code: String, now: Double) -> Authorization? {
        state.withLock { state in
            guard let found = state.codes.removeValue(forKey: code), found.expiresAt > now else { return nil }
            return found
        }
    }

    /// Issues an access token and a refresh token for `user`.
    func issue(user: String, scopes: [String], now: Double, lifetime: Double) -> (access: String, refresh: String) {
        let access = "dev_at_" + Base64URL.encode(SecureRandom.bytes(count: 24))
        let refresh = "dev_rt_" + Base64URL.encode(SecureRandom.bytes(count: 24))
        state.withLock { state in
            state.accessTokens[access] = Holder(user: user, scopes: scopes, expiresAt: now + lifetime)
            state.refreshTokens[refresh] = Holder(user: user, scopes: scopes, expiresAt: nil)
        }
        return (access, refresh)
    }

    /// Takes a refresh token (it is spent whatever happens next).
    func spendRefreshToken(_ token: String) -> Holder? {
        state.withLock { $0.refreshTokens.removeValue(forKey: token) }
    }

    func accessHolder(_ token: String, now: Double) -> Holder? {
        state.withLock { state in
            guard let holder = state.accessTokens[token], (holder.expiresAt ?? .infinity) > now else { return nil }
            return holder
        }
    }

    /// RFC 7009: revoking a refresh token also revokes the user's access tokens.
    func revoke(_ token: String) {
        state.withLock { state in
            state.accessTokens[token] = nil
            if let holder = state.refreshTokens.removeValue(forKey: token) {
                state.accessTokens = state.accessTokens.filter { $0.value.user != holder.user }
            }
        }
    }
}
