extension RedeemedSession {
    /// This session, granted at the issuer of `provider` (nil: the broker's own endpoint, every
    /// provider's): one issued for another issuer's provider is not handed out, and a session it
    /// created is ended (``GrantRefusal/unsaved(_:)`` when that cannot be saved: the session is
    /// then left to end by its lifetimes, nobody holding its token).
    func atIssuer(of provider: String?, endings: GrantEndings, otherwise refusal: String) async throws(GrantRefusal) -> RedeemedSession {
        guard let provider, session.provider != provider else { return self }
        if token != nil {
            do throws(StateWriteError) {
                _ = try await endings.endSession(session.id, .otherIssuer)
            } catch {
                throw .unsaved(error)
            }
        }
        throw .invalidGrant(refusal)
    }
}
