import Foundation
import HTTPServer
import WireValues

/// `GET /authorize` starts a login; `POST /authorize` asks for more scopes on an existing
/// session (incremental authorization). Both validate everything before anything is stored, and
/// answer invalid input with a JSON 400 — never a redirect, which could be an open redirector.
struct AuthorizeRoutes: Sendable {
    let services: BrokerServices

    func register(in router: inout Router) {
        router.add("GET", "/authorize") { [self] request throws(HTTPError) in
            try services.admit(request, to: services.loginLimiter, route: "/authorize")
            let wantsJSON = request.header("Accept")?.contains("application/json") == true
            return try start(try request.query(), session: nil, json: wantsJSON)
        }
        router.add("POST", "/authorize") { [self] request throws(HTTPError) in
            try services.admit(request, to: services.loginLimiter, route: "/authorize")
            // The form is read now (the request is gone later), its error answered after the session's.
            let form = Result { () throws(HTTPError) in try request.form() }
            return try services.withBearerSession(request) { [self] session throws(HTTPError) in
                try start(try form.get(), session: session, json: true)
            }
        }
    }

    private func start(_ fields: FormFields, session: Session?, json: Bool) throws(HTTPError) -> Reply {
        let login = try validate(fields, session: session)
        return .deferredCatching { [services] () async throws(HTTPError) -> Response in
            let provider = try await services.providers.provider(login.provider)
            let location: String
            do throws(StateWriteError) {
                location = try await services.login.begin(login, at: provider)
            } catch {
                throw error.httpError
            }
            return json ? .json(.object([("authorization_url", .string(location))])) : .redirect(to: location)
        }
    }

    private func validate(_ fields: FormFields, session: Session?) throws(HTTPError) -> LoginRequest {
        let appID = if let session { session.app } else { try fields.required("app") }
        if let session, let named = try fields.optional("app"), named != session.app {
            throw .badRequest("The session was created through another app.")
        }
        guard let app = services.config.app(id: appID) else { throw .badRequest("Unknown app.") }
        let providerID = if let session { session.provider } else { try fields.required("provider") }
        if let session, let named = try fields.optional("provider"), named != session.provider {
            throw .badRequest("The session belongs to another provider.")
        }
        guard services.providers.config(providerID) != nil else { throw .badRequest("Unknown provider.") }
        guard app.allows(provider: providerID) else {
            throw .badRequest("This app may not use this provider.", code: "unauthorized_client")
        }
        let redirectURI = try fields.required("redirect_uri")
        guard app.matchRegistered(redirectURI) != nil else {
            throw .badRequest("redirect_uri is not registered for this app.")
        }
        let challenge = try fields.required("code_challenge")
        guard PKCE.isWellFormed(challenge) else {
            throw .badRequest("code_challenge must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~.")
        }
        guard fields["code_challenge_method"] == "S256" else {
            throw .badRequest("code_challenge_method must be S256.")
        }
        let state = try fields.optional("state")
        if let state {
            guard state.utf8.count <= 1024 else { throw .badRequest("state is longer than 1024 bytes.") }
            // RFC 6749 Appendix A.5: printable ASCII.
            guard state.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
                throw .badRequest("state must be printable ASCII characters.")
            }
        }
        let scopes = try Self.scopes(fields)
        if session != nil, scopes.isEmpty { throw .badRequest("Incremental authorization needs a scope.") }
        let prompt = try fields.optional("prompt")
        if let prompt, !prompt.split(separator: " ", omittingEmptySubsequences: false)
            .allSatisfy({ ["none", "login", "consent", "select_account"].contains($0) }) {
            throw .badRequest("prompt must be none, login, consent or select_account.")
        }
        let loginHint = try fields.optional("login_hint")
        if let loginHint, loginHint.utf8.count > 256 { throw .badRequest("login_hint is longer than 256 bytes.") }
        return LoginRequest(
            provider: providerID, app: app.id, redirectURI: redirectURI, appState: state, challenge: challenge,
            scopes: scopes, loginHint: loginHint, prompt: prompt, session: session
        )
    }

    /// Requested scopes: RFC 6749 §3.3 scope tokens, separated by single spaces, at most 64 of
    /// them in at most 2048 bytes.
    private static func scopes(_ fields: FormFields) throws(HTTPError) -> [String] {
        guard let text = try fields.optional("scope") else { return [] }
        guard text.utf8.count <= 2048 else { throw .badRequest("scope is longer than 2048 bytes.") }
        let scopes = text.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        let valid = scopes.allSatisfy { scope in
            !scope.isEmpty && scope.utf8.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
        }
        guard valid, scopes.count <= 64 else { throw .badRequest("scope is not a list of valid scope tokens.") }
        return scopes
    }
}
