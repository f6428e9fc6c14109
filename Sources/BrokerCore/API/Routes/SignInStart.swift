import HTTPServer
import WireValues

/// What the broker's own `/authorize` and the standard authorization endpoint
/// (`/providers/{provider}/authorize`) share: checking an authorization request and starting it,
/// within the ceiling of sign-ins under way. A class: a sign-in's closures capture it, one
/// reference rather than a retain per field.
final class SignInStart: Sendable {
    let config: BrokerConfig
    let providers: ProviderDirectory
    let login: LoginFlow
    let ceiling: SignInCeiling
    let now: BrokerClock

    init(config: BrokerConfig, providers: ProviderDirectory, login: LoginFlow, ceiling: SignInCeiling, now: @escaping BrokerClock) {
        self.config = config
        self.providers = providers
        self.login = login
        self.ceiling = ceiling
        self.now = now
    }

    /// Starts the login `login` (``LoginFlow/begin(_:at:)``) and answers with `answer` of the
    /// provider's authorization URL; a failure (the ceiling of sign-ins under way, the provider
    /// out of reach) with `failure` of it when given (a page for a person, a redirect to the app),
    /// else the API's JSON error.
    func begin(_ login: LoginRequest, route: String, failure: (@Sendable (HTTPError) -> Response)? = nil,
               _ answer: @escaping @Sendable (String) -> Response) -> Reply {
        .deferredCatching { [self] () async throws(HTTPError) -> Response in
            do throws(HTTPError) {
                try await ceiling.admit(now: now(), route: route)
                let provider = try await providers.provider(login.provider)
                do throws(LoginStartError) {
                    return answer(try await self.login.begin(login, at: provider))
                } catch {
                    throw error.httpError
                }
            } catch {
                guard let failure else { throw error }
                return failure(error)
            }
        }
    }

    /// A login request for app `appID` at provider `providerID` from an authorization request's
    /// parameters, every value checked against the configuration.
    func loginRequest(_ fields: FormFields, app appID: String, provider providerID: String, session: Session?) throws(HTTPError) -> LoginRequest {
        guard let app = config.app(id: appID) else { throw .badRequest("Unknown app.") }
        guard providers.config(providerID) != nil else { throw .badRequest("Unknown provider.") }
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
        let back = AppReturn(redirectURI: redirectURI, state: state, challenge: challenge)
        guard let session else {
            return LoginRequest(provider: providerID, app: app.id, scopes: scopes, loginHint: loginHint, prompt: prompt, purpose: .app(back))
        }
        return .incremental(of: session, adding: scopes, app: app.id, back: back, loginHint: loginHint, prompt: prompt)
    }

    /// Requested scopes: RFC 6749 §3.3 scope tokens, separated by single spaces, at most 64 of
    /// them in at most ``maxScopeBytes``.
    static func scopes(_ fields: FormFields) throws(HTTPError) -> [String] {
        guard let text = try fields.optional("scope") else { return [] }
        guard text.utf8.count <= maxScopeBytes else { throw .badRequest("scope is longer than \(maxScopeBytes) bytes.") }
        let scopes = text.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        let valid = scopes.allSatisfy { scope in
            !scope.isEmpty && scope.utf8.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
        }
        guard valid, scopes.count <= 64 else { throw .badRequest("scope is not a list of valid scope tokens.") }
        return scopes
    }

    /// The longest `scope` an app may ask for: twenty of the longest scopes providers define
    /// (Google's and Microsoft's are URLs of about 50 bytes) fit; it is kept with each sign-in
    /// under way, which anyone can start.
    static let maxScopeBytes = 1024
}
