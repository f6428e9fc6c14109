import Foundation
import HTTPServer
import WireValues

/// `GET /callback`: the provider sends the browser back here. The broker's `state` must name a
/// login in progress (else a 400 page, never a redirect); from then on every outcome goes back to
/// the app's redirect URI (``LoginFlow/complete(_:state:with:)``): a handoff code on success,
/// `error=…` otherwise; a device login, only in the browser that began it
/// (``DeviceLoginCookie``), is sent on to the page that asks its person to confirm the account
/// (`/device/confirm`, an address of its own: a reload asks again, where replaying the callback
/// would find its login used).
///
/// A class: a callback's closures capture it, one reference rather than a retain per field.
final class CallbackRoute: Sendable {
    let login: LoginFlow
    let config: BrokerConfig
    let deviceLoginCookie: DeviceLoginCookie
    let admission: Admission
    let metrics: BrokerMetrics
    /// The device pages a device login's end shows.
    let pages: DevicePages

    init(login: LoginFlow, config: BrokerConfig, deviceLoginCookie: DeviceLoginCookie, admission: Admission, metrics: BrokerMetrics) {
        self.login = login
        self.config = config
        self.deviceLoginCookie = deviceLoginCookie
        self.admission = admission
        self.metrics = metrics
        pages = DevicePages(base: config.server.publicPath)
    }

    func register(in routes: inout RouteTable) {
        routes.add("GET", "/callback", admission.signInPolicy(.person, body: .none, page: Self.page)) { [self] request throws(HTTPError) in
            let wantsHTML = request.wantsHTML
            let fields: FormFields
            let state: String
            do throws(HTTPError) {
                fields = try request.query()
                state = try fields.required("state")
            } catch {
                return .now(wantsHTML ? Self.page(error) : error.response)
            }
            let answer = CallbackAnswer(code: fields["code"], error: fields["error"], errorDescription: fields["error_description"], issuer: fields["iss"])
            let cookie = deviceLoginCookie.tags(in: request)
            return .deferred { [self] in
                let found: PendingAuthorization?
                do throws(StateWriteError) {
                    found = try await login.takeLogin(state: state)
                } catch {
                    return wantsHTML ? Self.page(error.httpError) : error.httpError.response
                }
                guard let pending = found else {
                    // The browser that began a device login, back at its ended callback (a reload,
                    // the history): what the sign-in did stands, and its device page said so.
                    if wantsHTML, deviceLoginCookie.accepts(cookie, state: state) {
                        return pages.failure(Self.deviceLoginOver, status: 400)
                    }
                    let unknown = HTTPError.badRequest("This sign-in link is unknown, expired or already used.")
                    return wantsHTML ? Self.page(unknown) : unknown.response
                }
                if case .device = pending.purpose {
                    // A device login ends here, in the browser that chose to sign in and no other.
                    guard deviceLoginCookie.accepts(cookie, state: state) else {
                        metrics.rejected(route: "/callback", reason: "device_login_other_browser")
                        return wantsHTML ? pages.otherBrowser() : DevicePages.otherBrowserError.response
                    }
                }
                switch await login.complete(pending, state: state, with: answer) {
                case .app(let back, let outcome):
                    // RFC 9207: the issuer the app's answer comes from (its standard metadata names it).
                    let issuer = ("iss", config.issuer(of: pending.provider))
                    return .redirect(to: FormFields.url(back.redirectURI, adding: back.parameters(outcome) + [issuer]))
                case .device(let device, .signedIn):
                    let confirmation = config.server.publicURL.absoluteString + DevicePages.confirmationPath(device: device, state: state)
                    return Response(status: 303, headers: [HTTPHeader("Location", confirmation)])
                case .device(_, .refused(let refusal)):
                    return pages.refused(refusal)
                }
            }
        }
    }

    private static let deviceLoginOver = "This device sign-in has already ended, and what it did stands: nothing was sent again. "
        + "To sign a device in, enter the code it shows."

    /// The error as a page, for a person looking at a browser: the sign-in may have been an
    /// app's or a device's (its login, gone, no longer says which).
    @Sendable private static func page(_ error: HTTPError) -> Response {
        BrokerPage.failure(title: "Sign-in failed", message: BrokerPage.plainWords(forStatus: error.status), detail: error.description,
                           next: "Start again where you began: in the app you came from, or on the device you are signing in.",
                           status: error.status, headers: error.headers)
    }
}
