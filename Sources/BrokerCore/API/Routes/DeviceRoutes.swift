import BrokerCrypto
import Foundation
import HTTPServer
import WireValues

/// The device authorization grant (RFC 8628): `POST /device/authorize` gives a device its codes;
/// `/device` is where its user types the user code, sees what they allow, and refuses or goes on
/// to the provider's sign-in (``DeviceFlow``); the device polls at `POST /token`
/// (``TokenRoutes``). User-code entry is rate-limited per client and, for wrong codes, for all
/// clients together.
struct DeviceRoutes: Sendable {
    let config: BrokerConfig
    let providers: ProviderDirectory
    let devices: DeviceFlow
    let admission: Admission
    /// Tags that bind a browser to the device pages and to a device login.
    let binding: BrowserBinding
    let metrics: BrokerMetrics
    /// A person's code or decision: limited in the handler, which answers a refusal as a page.
    private static let entryPolicy = RoutePolicy(
        caller: .person, limit: .inHandler("device_code_entries_per_minute and the user-code guard, answered as a page"), body: .form
    )
    private static let questionPolicy = RoutePolicy(
        caller: .person, limit: .none(because: "it answers only the browser that typed the code (its cookie), with a code it found"), body: .none
    )

    private var csrf: DeviceCSRF { DeviceCSRF(secure: config.server.publicURL.scheme == "https", binding: binding) }
    private var deviceLoginCookie: DeviceLoginCookie { DeviceLoginCookie(config, binding: binding) }

    func register(in routes: inout RouteTable) {
        routes.add("POST", "/device/authorize", admission.signInPolicy(.app, body: .form)) { [self] request throws(HTTPError) in
            try authorize(try request.form(), route: request.route)
        }
        routes.add("GET", "/device", RoutePolicy(caller: .person, limit: .none(because: "a page and a CSRF cookie, made in memory"), body: .none)) {
            [self] request throws(HTTPError) in
            let typed = (try? request.query())?["user_code"]
            let (token, cookie) = csrf.token(request)
            return .now(pages.entry(userCode: typed.flatMap(UserCode.normalise).map(UserCode.display), csrf: token, cookie: cookie))
        }
        routes.add("POST", "/device", Self.entryPolicy) { [self] request throws(HTTPError) in
            switch admitForm(request) {
            case .failure(let page): return .now(page.response)
            case .success(let form):
                let client = request.clientIP
                // The form was accepted, so the browser has its cookie, which binds the question.
                let cookie = csrf.cookie(request) ?? ""
                let bind = { @Sendable [csrf] (device: SHA256Digest) in csrf.questionTag(cookie: cookie, device: device) }
                return .deferred { [self] in await enter(form, client: client, bind: bind) }
            }
        }
        // The question for a code found at `/device`, at an address of its own: a reload, or
        // Back from the provider's sign-in, asks it again rather than sending the form twice.
        // The address names the device code (by its hash) and is bound to the browser that typed
        // its user code: nothing in it can be guessed, so it counts no entry and no wrong code.
        // Any other browser, and the address of the forms opened again, get the code's page.
        routes.add("GET", "/device/decision", Self.questionPolicy) { [self] request throws(HTTPError) in
            let codePage = Reply.now(.redirect(to: config.server.publicURL.absoluteString + "/device"))
            guard let query = try? request.query(), let raw = query["device"].flatMap(Base64URL.decode), let device = SHA256Digest(bytes: raw),
                  let typed = query["user_code"], let tag = query["check"],
                  csrf.acceptsQuestion(request, device: device, tag: tag) else { return codePage }
            let token = csrf.token(request).token
            return .deferred { [self] in await question(device, typed: typed, csrf: token) }
        }
        let fixed = RoutePolicy(caller: .person, limit: .none(because: "a fixed answer, made in memory from nothing the request holds"), body: .none)
        // Where a refusal at the device's page leads, so that a reload shows it again rather
        // than sending the spent code once more.
        routes.add("GET", DevicePages.refusedPath, fixed) { _ in
            .now(pages.denied())
        }
        routes.add("POST", "/device/decision", Self.entryPolicy) { [self] request throws(HTTPError) in
            switch admitForm(request) {
            case .failure(let page): return .now(page.response)
            case .success(let form):
                let client = request.clientIP
                let bound = deviceLoginCookie.tags(in: request)
                return .deferred { [self] in await decide(form, client: client, bound: bound) }
            }
        }
        routes.add("GET", "/device/confirm", RoutePolicy(
            caller: .person, limit: .none(because: "it answers only the browser whose sign-in it confirms (its cookie)"), body: .none
        )) { [self] request throws(HTTPError) in
            let query: FormFields
            do throws(HTTPError) {
                query = try request.query()
            } catch {
                return .now(page(error))
            }
            guard let state = query["state"], (1...512).contains(state.unicodeScalars.count), let raw = query["device"].flatMap(Base64URL.decode),
                  let device = SHA256Digest(bytes: raw) else {
                return .now(page(.badRequest("This address is incomplete; enter the code again.")))
            }
            let cookie = deviceLoginCookie
            guard cookie.accepts(cookie.tags(in: request), state: state) else {
                metrics.rejected(route: "/device/confirm", reason: "device_login_other_browser")
                return .now(pages.otherBrowser())
            }
            return .deferred { [self] in await askToConfirm(device, state: state) }
        }
        // The last step of a sign-in, counted with sign-ins (as `/callback`), not with the codes
        // typed: a person signing in several devices must not be stopped there.
        let confirmRefused = pages
        routes.add("POST", "/device/confirm", admission.signInPolicy(.person, body: .form, page: { error in
            confirmRefused.failure(error.description, status: error.status, headers: error.headers)
        })) { [self] request throws(HTTPError) in
            let form: FormFields
            do throws(HTTPError) {
                form = try request.form()
            } catch {
                return .now(page(error))
            }
            let cookie = deviceLoginCookie
            guard let state = form["state"], cookie.accepts(cookie.tags(in: request), state: state) else {
                metrics.rejected(route: "/device/confirm", reason: "device_login_other_browser")
                return .now(pages.otherBrowser())
            }
            return .deferred { [self] in await confirm(form, state: state) }
        }
    }

    /// RFC 8628 §3.1–3.2, the broker's own spelling: the provider named in the form.
    private func authorize(_ form: FormFields, route: String) throws(HTTPError) -> Reply {
        guard let appID = try DeviceRoutes.app(form) else { throw .badRequest("Missing parameter: app (or client_id).") }
        return try authorize(app: appID, provider: try form.required("provider"), scopes: try SignInStart.scopes(form), route: route)
    }

    /// RFC 8628 §3.1–3.2 for `app` at `providerID`, asking for the provider's configured scopes
    /// and `scopes`: here and at the standard endpoint (``StandardTokenRoutes``), where the
    /// provider is the issuer's.
    func authorize(app appID: String, provider providerID: String, scopes: [String], route: String) throws(HTTPError) -> Reply {
        guard let app = config.app(id: appID) else { throw .badRequest("Unknown app.") }
        guard app.deviceFlow else {
            throw .badRequest("This app is not registered for the device flow (device_flow: true).", code: "unauthorized_client")
        }
        guard let provider = providers.config(providerID) else { throw .badRequest("Unknown provider.") }
        guard app.allows(provider: providerID) else {
            throw .badRequest("This app may not use this provider.", code: "unauthorized_client")
        }
        let verification = config.server.publicURL.appendingPathComponent("device").absoluteString
        return .deferredCatching { [devices, admission] () async throws(HTTPError) -> Response in
            try await admission.signInCeiling.admit(now: admission.now(), route: route)
            let codes: DeviceFlow.Codes
            do throws(StateWriteError) {
                codes = try await devices.start(app: app.id, provider: provider, scopes: scopes)
            } catch {
                throw error.httpError
            }
            let userCode = UserCode.display(codes.userCode)
            return .json(.object([
                ("device_code", .string(codes.deviceCode)),
                ("user_code", .string(userCode)),
                ("verification_uri", .string(verification)),
                ("verification_uri_complete", .string(FormFields.url(verification, adding: [("user_code", userCode)]))),
                ("expires_in", .int(Int(codes.expiresIn))),
                ("interval", .int(Int(codes.interval))),
            ]))
        }
    }

    /// A `/device` form: from this browser's own page (CSRF), within the client's entry limit.
    private func admitForm(_ request: Request) -> Result<FormFields, Page> {
        let form: FormFields
        do throws(HTTPError) {
            form = try request.form()
        } catch {
            return .failure(Page(page(error)))
        }
        guard csrf.accepts(request, form) else {
            metrics.rejected(route: request.route, reason: "csrf")
            return .failure(Page(page(HTTPError(
                status: 403, code: "forbidden",
                description: "This form is out of date or did not come from this page; open the device page again."))))
        }
        do throws(HTTPError) {
            try admission.admit(request, to: admission.deviceEntryLimiter)
        } catch {
            metrics.userCodeEntry(outcome: "rate_limited")
            return .failure(Page(page(error)))
        }
        return .success(form)
    }

    /// The code typed at `/device`: on to the question's own address, bound to this browser by
    /// `bind` (``question(_:typed:csrf:)``), or the form again.
    private func enter(_ form: FormFields, client: String, bind: @Sendable (SHA256Digest) -> String) async -> Response {
        switch await find(form, client: client) {
        case .failure(let page): return page.response
        case .success(let waiting):
            let address = FormFields.url("/device/decision", adding: [
                ("device", Base64URL.encode(waiting.code.bytes)), ("user_code", UserCode.display(waiting.userCode)), ("check", bind(waiting.code)),
            ])
            return Response(status: 303, headers: [HTTPHeader("Location", config.server.publicURL.absoluteString + address)])
        }
    }

    /// The page that asks to allow or refuse the device code `code` while it waits under the
    /// user code `typed`; once it no longer does (allowed, refused, expired), a page that says so.
    private func question(_ code: SHA256Digest, typed: String, csrf: String) async -> Response {
        do throws(HTTPError) {
            let found: DeviceFlow.Waiting?
            do throws(StateReadError) {
                found = try await devices.waiting(code, typed: typed)
            } catch {
                throw error.httpError
            }
            guard let waiting = found else { throw .badRequest(Self.gone) }
            let appName = config.app(id: waiting.device.app)?.shownName ?? waiting.device.app
            let providerName = providers.config(waiting.device.provider)?.shownName ?? waiting.device.provider
            return pages.confirm(waiting, appName: appName, providerName: providerName, csrf: csrf)
        } catch {
            return page(error)
        }
    }

    /// Allow (on to the provider's sign-in) or refuse.
    private func decide(_ form: FormFields, client: String, bound: [String]) async -> Response {
        guard let decision = form["decision"], ["approve", "deny"].contains(decision) else {
            return page(.badRequest("Choose to continue or to refuse."))
        }
        let waiting: DeviceFlow.Waiting
        switch await find(form, client: client) {
        case .failure(let page): return page.response
        case .success(let found): waiting = found
        }
        do throws(HTTPError) {
            if decision == "deny" {
                let denied: Bool
                do throws(StateWriteError) {
                    denied = try await devices.deny(waiting)
                } catch {
                    throw error.httpError
                }
                guard denied else { throw .badRequest(Self.gone) }
                return Response(status: 303, headers: [HTTPHeader("Location", config.server.publicURL.absoluteString + DevicePages.refusedPath)])
            }
            let provider = try await providers.provider(waiting.device.provider)
            let login: (location: String, state: String)
            do throws(LoginStartError) {
                login = try await devices.signIn(waiting, at: provider)
            } catch {
                throw error.httpError
            }
            // Only this browser may finish the login (a provider URL passed on is refused).
            let cookie = deviceLoginCookie.set(state: login.state, seconds: waiting.device.expiresAt - admission.now(), keeping: bound)
            return Response(status: 303, headers: [HTTPHeader("Location", login.location), cookie])
        } catch {
            return page(error)
        }
    }

    /// The question of the account that signed in, for the browser that signed in: again on a
    /// reload, until it is answered; then what the answer did.
    private func askToConfirm(_ device: SHA256Digest, state: String) async -> Response {
        let confirmation: DeviceFlow.Confirmation
        do throws(StateReadError) {
            confirmation = try await devices.confirmation(device, state: state)
        } catch {
            return page(error.httpError)
        }
        switch confirmation {
        case .ask(let account, let app, let provider):
            return pages.confirmAccount(account, app: config.app(id: app)?.shownName ?? app,
                                              provider: providers.config(provider)?.shownName ?? provider, device: device, state: state)
        case .confirmed:
            return pages.finished()
        case .refused:
            return pages.denied()
        case .over:
            return page(.badRequest(Self.gone))
        }
    }

    /// The account that signed in, allowed or refused by the browser that signed in.
    private func confirm(_ form: FormFields, state: String) async -> Response {
        guard let decision = form["decision"], ["approve", "deny"].contains(decision) else {
            return page(.badRequest("Choose to allow the device or to refuse."))
        }
        guard let raw = form["device"].flatMap(Base64URL.decode), let device = SHA256Digest(bytes: raw) else {
            return page(.badRequest("This form is incomplete; enter the code again."))
        }
        let done: Bool
        do throws(StateWriteError) {
            done = try await devices.confirm(device, state: state, approve: decision == "approve")
        } catch {
            return page(error.httpError)
        }
        guard done else { return page(.badRequest(Self.gone)) }
        // Answered by the confirmation's own address, which now says what became of the device:
        // a reload shows that again, rather than sending the answer twice.
        let location = config.server.publicURL.absoluteString + DevicePages.confirmationPath(device: device, state: state)
        return Response(status: 303, headers: [HTTPHeader("Location", location)])
    }

    /// The app a device request names: `app`, or the standard `client_id`; both must then agree.
    static func app(_ form: FormFields) throws(HTTPError) -> String? {
        let app = try form.optional("app")
        let clientID = try form.optional("client_id")
        if let app, let clientID, app != clientID { throw .badRequest("app and client_id name different apps.") }
        return app ?? clientID
    }

    private static let gone = "This code is unknown, expired or already used. Check the code your device shows, or start again on the device."

    /// The waiting device code the form's `user_code` names, or the page to answer instead. A
    /// wrong code from `client` counts against its own, its network's and every client's budget
    /// (``UserCodeGuard``); none is tried while its own or its network's is spent, and while
    /// everyone's is, only one from a network that sent no wrong code lately, slowly.
    private func find(_ form: FormFields, client: String) async -> Result<DeviceFlow.Waiting, Page> {
        let csrfToken = form["csrf"] ?? ""
        switch admission.userCodeGuard.admit(client, now: admission.now()) {
        case .now:
            break
        case .slowed(let seconds):
            metrics.userCodeEntry(outcome: "slowed")
            try? await Task.sleep(for: .seconds(seconds))
        case .refused(let wait):
            metrics.userCodeEntry(outcome: "rate_limited")
            let seconds = Int(wait.rounded(.up))
            return .failure(Page(pages.failure(
                "Too many wrong codes were entered; try again in \(seconds) second\(seconds == 1 ? "" : "s").", status: 429,
                headers: [HTTPHeader("Retry-After", String(seconds))])))
        }
        let typed = form["user_code"] ?? ""
        guard UserCode.normalise(typed) != nil else {
            metrics.userCodeEntry(outcome: "malformed")
            return .failure(Page(pages.entry(userCode: Self.retyped(typed), csrf: csrfToken,
                                                   message: "A code has 8 letters, like BCDF-GHJK. Check the code your device shows.", status: 400)))
        }
        let found: DeviceFlow.Waiting?
        do throws(StateReadError) {
            found = try await devices.find(typed: typed)
        } catch {
            return .failure(Page(page(error.httpError)))
        }
        guard let found else {
            admission.userCodeGuard.miss(client, now: admission.now())
            metrics.userCodeEntry(outcome: "unknown")
            return .failure(Page(pages.entry(userCode: Self.retyped(typed), csrf: csrfToken, message: Self.gone, status: 400)))
        }
        metrics.userCodeEntry(outcome: "found")
        return .success(found)
    }

    /// A code that was not found, back in the input for its person to correct one letter rather
    /// than type it all again (no longer than the input takes).
    private static func retyped(_ typed: String) -> String {
        String(typed.prefix(16))
    }

    /// A page answered instead of going on.
    private struct Page: Error {
        let response: Response

        init(_ response: Response) {
            self.response = response
        }
    }

    /// An error as a page for the person at the browser, keeping its status and headers.
    private func page(_ error: HTTPError) -> Response {
        pages.failure(error.description, status: error.status, headers: error.headers)
    }

    /// The pages, their forms and links under the public URL's path.
    private var pages: DevicePages { DevicePages(base: config.server.publicPath) }
}
