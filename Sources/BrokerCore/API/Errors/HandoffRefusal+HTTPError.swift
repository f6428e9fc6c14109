import HTTPServer

extension HandoffRefusal {
    /// The error a client gets: RFC 6749 §5.2's `invalid_grant` for a code that does not work.
    var httpError: HTTPError {
        switch self {
        case .unknownCode: .badRequest("The code is unknown or expired.", code: "invalid_grant")
        case .replayed: .badRequest("The code was already used; the session it gave out has been ended.", code: "invalid_grant")
        case .wrongClient: .badRequest("The code was issued to another app or redirect_uri.", code: "invalid_grant")
        case .malformedVerifier:
            .badRequest("code_verifier is malformed: 43 to 128 characters of A-Z a-z 0-9 - . _ ~ (RFC 7636 §4.1).")
        case .wrongVerifier: .badRequest("code_verifier does not match the code_challenge.", code: "invalid_grant")
        case .wrongIssuer: .badRequest("The code was issued by another issuer.", code: "invalid_grant")
        case .boundSessionAtIssuer:
            .badRequest("The code added scopes to a session bound to a key: redeem it at POST /token, or keep using the session's token.",
                        code: "invalid_grant")
        case .wrongKey: .badRequest("The code added scopes to a session bound to a key: send a DPoP proof of that key with the token request.",
                                    code: "invalid_dpop_proof")
        case .sessionGone: .badRequest("The session this code stands for has ended; sign in again.", code: "invalid_grant")
        case .refusedTooOften:
            .badRequest("This code was refused too often and can no longer be used; start the sign-in again.", code: "invalid_grant")
        case .signedOut: .badRequest("The user was signed out before this code was redeemed; sign in again.", code: "invalid_grant")
        case .unsaved: .unsaved
        }
    }
}
