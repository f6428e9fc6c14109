import BrokerCrypto

@testable import BrokerCore

extension HandoffAttempt {
    /// A redemption by `app` at `redirectURI` with `verifier` at `at`, releasing (if it does) the
    /// session `session` names.
    static func demo(verifier: String, app: String = "demo", redirectURI: String = "http://127.0.0.1/cb", at: Double,
                     session: String = "tbs_released") -> HandoffAttempt {
        HandoffAttempt(app: app, redirectURI: redirectURI, verifier: verifier, sessionID: OpaqueToken.hash(session), at: at)
    }
}
