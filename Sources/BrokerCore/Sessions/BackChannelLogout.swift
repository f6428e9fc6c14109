import BrokerCrypto
import Foundation
import WireValues

/// OpenID Connect Back-Channel Logout 1.0 at the broker: a provider's logout token, verified
/// (``LogoutTokenVerifier``) and accepted once across instances (its `jti` spent in the store
/// once its sessions are ended, so that a replay — even one arriving after the user signed in
/// again — ends nothing, while the provider's retry of a delivery that failed works), signs out
/// the user it names by `sub` and/or `sid` at that provider, on every instance
/// (``GrantEndings/signOut(_:)``): their sessions, their sign-ins under way, and those still at
/// the provider's page, which end when they come back. Revocations at the provider are left to
/// the queue: the provider is the caller here, and may not answer its own revocation endpoint
/// while it waits for this answer.
struct BackChannelLogout: Sendable {
    let providers: ProviderDirectory
    let verifier: LogoutTokenVerifier
    let store: any StateStore
    let endings: GrantEndings
    let audit: AuditTrail

    /// Why a logout token ended nothing.
    enum Failure: Error, Sendable {
        /// The token is not a valid logout token of this provider, or was already received: 400.
        case refused(LogoutTokenError)
        /// The provider is not an OpenID Connect issuer here: 400.
        case notAnIssuer
        /// The provider's discovery document or keys, or the store, cannot be reached now: 503.
        case unavailable(String)
    }

    /// Signs out the user `token` names: what that ended.
    func logOut(_ token: String, provider id: String) async throws(Failure) -> GrantEndings.SignedOut {
        let provider: Provider
        do {
            provider = try await providers.resolve(id)
        } catch {
            throw .unavailable("the provider's discovery document")
        }
        guard let issuer = provider.issuer, let jwksURI = provider.jwksURI else { throw .notAnIssuer }
        let logout: LogoutTokenVerifier.Logout
        do {
            logout = try await verifier.verify(token, jwksURI: jwksURI, issuer: issuer, clientID: provider.config.clientID)
        } catch {
            if error.keySetUnavailable { throw .unavailable("the provider's key set") }
            audit.refused("backchannel_logout.refused", [("provider", .string(id)), ("reason", .string(error.description))])
            throw .refused(error)
        }
        // Spent once its work is done, not before: a token whose sessions could not all be ended
        // (the store out of reach) is not spent, so the provider's retry counts — ending is
        // idempotent, and a replay racing the first delivery ends the same sessions. Spending first
        // and giving the token back on failure failed when the store could not take that either:
        // the retry was refused as a replay, and the sessions outlived the provider's logout.
        let spent = SHA256.hash(Array("backchannel-logout\u{0}\(logout.issuer)\u{0}\(logout.tokenID)".utf8))
        let replayed: Bool
        do {
            replayed = try await store.isSpent(spent, now: verifier.clock())
        } catch {
            throw .unavailable("the state store")
        }
        guard !replayed else {
            audit.refused("backchannel_logout.refused", [("provider", .string(id)), ("reason", .string(LogoutTokenError.replayed.description))])
            throw .refused(.replayed)
        }
        // A provider session that ended covers every sign-in made with it, whenever: a sign-in
        // after the logout is made with another. A user's logout covers what was signed in before it.
        let signOut = SignOut(provider: id, subject: logout.subject, providerSessionID: logout.providerSessionID,
                              signedInBefore: logout.providerSessionID == nil ? logout.signedInBefore : .greatestFiniteMagnitude,
                              reason: .backChannelLogout)
        let ended: GrantEndings.SignedOut
        do {
            ended = try await endings.signOut(signOut)
        } catch {
            throw .unavailable("the state store")
        }
        var fields: [(String, JSONValue)] = [("provider", .string(id))]
        if let subject = logout.subject { fields.append(("subject", .string(subject))) }
        if let session = logout.providerSessionID { fields.append(("sid", .string(session))) }
        audit.record("backchannel_logout", fields + [
            ("ended", .int(ended.sessions.count)), ("pending_sign_ins_ended", .int(ended.signIns.count)),
            ("sessions", .array(ended.sessions.compactMap(\.sessionID).map { .string($0.hex) })),
        ])
        do {
            // False when a delivery racing this one spent it first: both did the same work.
            _ = try await store.spendOnce(spent, until: logout.rememberUntil)
        } catch {
            throw .unavailable("the state store")
        }
        return ended
    }
}
