import HTTPServer
import WireValues

/// `POST /providers/{provider}/backchannel_logout`, for every OpenID Connect provider: the
/// provider's logout token (OpenID Connect Back-Channel Logout 1.0 §2.5, a form with
/// `logout_token`) signs out the user it names (``BackChannelLogout``). 200 with an empty object,
/// or 400 with `invalid_request` and a sentence that quotes nothing of the token; 503 when the
/// provider's keys or the store cannot be reached. `Cache-Control: no-store`, as every answer.
struct BackChannelLogoutRoute: Sendable {
    /// The providers that post logout tokens here.
    let providers: [String]
    let logout: BackChannelLogout
    /// A provider posts from few addresses, each token is checked against its keys (fetched at
    /// most as the key-set cache allows) and accepted once.
    static let policy = RoutePolicy(
        caller: .provider, limit: .none(because: "a bogus token costs one signature check, a known one is accepted once"), body: .form
    )

    func register(in routes: inout RouteTable) {
        for provider in providers {
            routes.add("POST", "/providers/\(provider)/backchannel_logout", Self.policy) { [logout] request throws(HTTPError) in
                let token = try request.form().required("logout_token")
                return .deferredCatching { () async throws(HTTPError) -> Response in
                    do throws(BackChannelLogout.Failure) {
                        _ = try await logout.logOut(token, provider: provider)
                        return .json(.object([]))
                    } catch {
                        switch error {
                        case .refused(let reason): throw .badRequest("The logout token was refused: \(reason.description).")
                        case .notAnIssuer: throw .badRequest("This provider is not an OpenID Connect issuer here.")
                        case .unavailable(let what):
                            throw .serviceUnavailable("temporarily_unavailable", "The broker cannot reach \(what) now; retry shortly.", retryAfterSeconds: 5)
                        }
                    }
                }
            }
        }
    }
}
