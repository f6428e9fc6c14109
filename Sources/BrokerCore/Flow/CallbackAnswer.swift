import BrokerCrypto

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

/// How a login ends at `/callback`, by its purpose: an app's redirect URI gets a handoff code or
/// an OAuth error (RFC 6749 §4.1.2), with the app's own `state` either way; a device login's
/// person gets a page (the account to confirm for the device code, or what went wrong).
enum LoginCompletion: Sendable, Equatable {
    case app(AppReturn, AppLoginOutcome)
    case device(SHA256Digest, DeviceLoginOutcome)
}

/// An app's login: its grant (or, for an incremental authorization, the session it merged into)
/// behind a one-time handoff code, or the refusal.
enum AppLoginOutcome: Sendable, Equatable {
    case handoff(code: String)
    case refused(LoginRefusal)
}

/// A device login (RFC 8628): signed in at the provider as `account`, whose grant waits on the
/// device code for its person to confirm that account; or the refusal.
enum DeviceLoginOutcome: Sendable, Equatable {
    case signedIn(account: String)
    case refused(LoginRefusal)
}

/// A failed login: an RFC 6749 §4.1.2.1 error code and a short description.
struct LoginRefusal: Error, Sendable, Equatable {
    let error: String
    let description: String?
}

extension AppReturn {
    /// The query parameters the app's redirect URI receives for `outcome`.
    func parameters(_ outcome: AppLoginOutcome) -> [(String, String)] {
        var parameters: [(String, String)]
        switch outcome {
        case .handoff(let code):
            parameters = [("code", code)]
        case .refused(let refusal):
            parameters = [("error", refusal.error)]
            if let description = refusal.description { parameters.append(("error_description", String(description.prefix(200)))) }
        }
        if let state { parameters.append(("state", state)) }
        return parameters
    }
}

extension AppLoginOutcome {
    init(_ handedOff: Result<String, LoginRefusal>) {
        switch handedOff {
        case .success(let code): self = .handoff(code: code)
        case .failure(let refusal): self = .refused(refusal)
        }
    }
}

extension DeviceLoginOutcome {
    init(_ held: Result<String, LoginRefusal>) {
        switch held {
        case .success(let account): self = .signedIn(account: account)
        case .failure(let refusal): self = .refused(refusal)
        }
    }
}
