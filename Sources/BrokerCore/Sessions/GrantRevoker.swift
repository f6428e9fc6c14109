import Logging

/// What became of a grant's tokens at the provider once its session was ended here: the
/// `provider_revocation` of `POST /revoke`.
enum ProviderRevocation: String, Sendable {
    /// The provider confirmed the revocation of every token (RFC 7009: any 200).
    case succeeded
    /// The provider could not be asked, or did not confirm.
    case failed
    /// The provider has no revocation endpoint.
    case notSupported = "not_supported"
}

/// Asks a provider to revoke a grant's refresh token, then its access token (RFC 7009): after
/// `POST /revoke`, and after a replayed handoff code, whose first redeemer may hold the access
/// token. The session must already be gone here: whatever the provider says next, it stays gone.
struct GrantRevoker: Sendable {
    let providers: ProviderDirectory
    let calls: ProviderCalls
    let logger: Logger

    func revoke(_ providerID: String, accessToken: String, refreshToken: String?) async -> ProviderRevocation {
        guard let provider = try? await providers.resolve(providerID), provider.revocationEndpoint != nil else {
            return .notSupported
        }
        var confirmed = true
        if let refreshToken {
            confirmed = await calls.revoke(refreshToken, hint: "refresh_token", provider: provider)
        }
        confirmed = await calls.revoke(accessToken, hint: "access_token", provider: provider) && confirmed
        if !confirmed { logger.warning("revocation at the provider failed", metadata: ["provider": "\(provider.id)"]) }
        return confirmed ? .succeeded : .failed
    }

    /// The tokens of an ended session.
    func revoke(_ session: Session) async -> ProviderRevocation {
        await revoke(session.provider, accessToken: session.accessToken, refreshToken: session.refreshToken)
    }
}
