import HTTPServer

extension DevicePollRefusal {
    /// RFC 8628 §3.5: 400 with the error a polling device acts on.
    var httpError: HTTPError {
        switch self {
        case .unknownCode: .badRequest("The device code is unknown, or was issued to another app.", code: "invalid_grant")
        case .used: .badRequest("The device code was already used.", code: "invalid_grant")
        case .expired: .badRequest("The device code expired; request a new one.", code: "expired_token")
        case .pending: .badRequest("The user has not finished signing in yet; poll again after the interval.", code: "authorization_pending")
        case .slowDown(let interval):
            .badRequest("Polled too soon; wait \(Int(interval)) seconds between polls.", code: "slow_down")
        case .denied: .badRequest("The user refused to sign the device in.", code: "access_denied")
        case .signedOut: .badRequest("The user was signed out before the device collected the sign-in; start again.", code: "access_denied")
        case .unsaved: .unsaved
        }
    }
}
