import Foundation
import HTTPServer
import WireValues

/// `GET /callback`: the provider sends the browser back here. The broker's `state` must name a
/// login in progress (else a 400 page, never a redirect); from then on every outcome goes back to
/// the app's redirect URI (``LoginFlow/complete(_:state:with:)``): a handoff code on success,
/// `error=…` otherwise; a device login, only in the browser that began it
/// (``DeviceLoginCookie``), ends on a page that asks its person to confirm the account
/// (``DevicePages``).
struct CallbackRoute: Sendable {
    let services: BrokerServices

    func register(in router: inout Router) {
        router.add("GET", "/callback") { [services] request throws(HTTPError) in
            try services.admit(request, to: services.loginLimiter)
            let wantsHTML = BrokerPage.wanted(by: request)
            let fields: FormFields
            let state: String
            do throws(HTTPError) {
                fields = try request.query()
                state = try fields.required("state")
            } catch {
                return .now(wantsHTML ? Self.page(error) : error.response)
            }
            let answer = CallbackAnswer(code: fields["code"], error: fields["error"], errorDescription: fields["error_description"], issuer: fields["iss"])
            let deviceLoginCookie = services.deviceLoginCookie.value(in: request)
            return .deferred { [services] in
                let pending: PendingAuthorization
                do throws(HTTPError) {
                    let found: PendingAuthorization?
                    do throws(StateWriteError) {
                        found = try await services.login.takeLogin(state: state)
                    } catch {
                        throw error.httpError
                    }
                    guard let found else {
                        throw .badRequest("This sign-in link is unknown, expired or already used; start again from the app.")
                    }
                    pending = found
                } catch {
                    return wantsHTML ? Self.page(error) : error.response
                }
                if case .device = pending.purpose {
                    // A device login ends here, in the browser that chose to sign in and no other.
                    guard services.deviceLoginCookie.accepts(deviceLoginCookie, state: state) else {
                        services.metrics.rejected(route: "/callback", reason: "device_login_other_browser")
                        return wantsHTML ? DevicePages.otherBrowser() : DevicePages.otherBrowserError.response
                    }
                }
                switch await services.login.complete(pending, state: state, with: answer) {
                case .app(let back, let outcome):
                    // RFC 9207: the issuer the app's answer comes from (its standard metadata names it).
                    let issuer = ("iss", services.issuer(of: pending.provider))
                    return .redirect(to: FormFields.url(back.redirectURI, adding: back.parameters(outcome) + [issuer]))
                case .device(let device, let outcome):
                    return DevicePages.signedIn(outcome, app: services.config.app(id: pending.app)?.shownName ?? pending.app,
                                                provider: services.providers.config(pending.provider)?.shownName ?? pending.provider,
                                                device: device, state: state)
                }
            }
        }
    }

    /// The error as a page, for a person looking at a browser.
    private static func page(_ error: HTTPError) -> Response {
        BrokerPage.failure(title: "Sign-in failed", message: error.description,
                           next: "Go back to the app you came from and sign in again.", status: error.status, headers: error.headers)
    }
}
