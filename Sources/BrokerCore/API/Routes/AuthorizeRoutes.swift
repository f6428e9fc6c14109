import Foundation
import HTTPServer
import WireValues

/// `GET /authorize` starts a login; `POST /authorize` asks for more scopes on an existing
/// session (incremental authorization). Both validate everything before anything is stored, and
/// answer invalid input with a 400 — JSON, or a page for a browser; never a redirect, which could
/// be an open redirector.
struct AuthorizeRoutes: Sendable {
    let signIns: SignInStart
    let callers: Callers
    let admission: Admission

    func register(in routes: inout RouteTable) {
        routes.add("GET", "/authorize", admission.signInPolicy(.app, body: .none, page: Self.page)) { [self] request throws(HTTPError) in
            let wantsJSON = request.wantsJSON
            do throws(HTTPError) {
                return try start(try request.query(), session: nil, json: wantsJSON, page: !wantsJSON && request.wantsHTML,
                                 route: request.route)
            } catch {
                // A person at a browser sees the error as a page; an API client gets JSON.
                guard !wantsJSON, request.wantsHTML else { throw error }
                return .now(Self.page(error))
            }
        }
        routes.add("POST", "/authorize", admission.signInPolicy(.session, body: .form)) { [self] request throws(HTTPError) in
            // The form is read now (the request is gone later), its error answered after the session's.
            let form = Result { () throws(HTTPError) in try request.form() }
            let route = request.route
            return try callers.withBearerSession(request) { [self] session throws(HTTPError) in
                try start(try form.get(), session: session, json: true, route: route)
            }
        }
    }

    /// An invalid sign-in request, or one that cannot start now, as a page: it goes back to no
    /// app, which could be an open redirector.
    @Sendable static func page(_ error: HTTPError) -> Response {
        let title = error.status == 429 || error.status >= 500 ? "The sign-in cannot start right now" : "This sign-in link does not work"
        return BrokerPage.failure(title: title, message: BrokerPage.plainWords(forStatus: error.status),
                           detail: error.description,
                           next: "Go back to the app you came from and start the sign-in again; if this keeps happening, tell the app's makers.",
                           status: error.status, headers: error.headers)
    }

    /// Starts the sign-in the request asks for; with `page`, what cannot start is a page.
    private func start(_ fields: FormFields, session: Session?, json: Bool, page: Bool = false, route: String) throws(HTTPError) -> Reply {
        let login = try validate(fields, session: session)
        return signIns.begin(login, route: route, failure: page ? Self.page : nil) { location in
            json ? .json(.object([("authorization_url", .string(location))])) : .redirect(to: location)
        }
    }

    private func validate(_ fields: FormFields, session: Session?) throws(HTTPError) -> LoginRequest {
        let appID = if let session { session.app } else { try fields.required("app") }
        if let session, let named = try fields.optional("app"), named != session.app {
            throw .badRequest("The session was created through another app.")
        }
        let providerID = if let session { session.provider } else { try fields.required("provider") }
        if let session, let named = try fields.optional("provider"), named != session.provider {
            throw .badRequest("The session belongs to another provider.")
        }
        return try signIns.loginRequest(fields, app: appID, provider: providerID, session: session)
    }
}
