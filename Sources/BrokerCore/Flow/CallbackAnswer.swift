/// What the provider sent the browser back to `/callback` with, besides the broker's `state`
/// (RFC 6749 §4.1.2, RFC 9207): a code, or an error. Taken as the query string has it; the
/// login flow decides what is well-formed.
struct CallbackAnswer: Sendable {
    let code: String?
    let error: String?
    let errorDescription: String?
    /// RFC 9207's `iss`, when the provider sends one.
    let issuer: String?
}

/// How a login ends at `/callback`: the app's redirect URI with either a handoff code or an
/// OAuth error (RFC 6749 §4.1.2), and the app's own `state` either way; for a device login, a
/// page for the person at the browser instead.
struct LoginCompletion: Sendable {
    enum Outcome: Sendable, Equatable {
        /// The grant is stored behind this one-time handoff code.
        case handoff(code: String)
        /// A device login (RFC 8628) signed in at the provider as `account`: its grant waits on
        /// the device code for the person to confirm that account.
        case deviceSignedIn(account: String)
        /// The login failed: an RFC 6749 §4.1.2.1 error code and a short description.
        case refused(error: String, description: String?)
    }

    let redirectURI: String
    let appState: String?
    let outcome: Outcome

    /// The query parameters the app's redirect URI receives.
    var parameters: [(String, String)] {
        var parameters: [(String, String)]
        switch outcome {
        case .handoff(let code):
            parameters = [("code", code)]
        case .deviceSignedIn:
            parameters = []
        case .refused(let error, let description):
            parameters = [("error", error)]
            if let description { parameters.append(("error_description", String(description.prefix(200)))) }
        }
        if let appState { parameters.append(("state", appState)) }
        return parameters
    }
}
