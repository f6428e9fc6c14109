import BrokerCrypto
import Foundation
import Logging

@testable import BrokerCore

/// The flow services as the broker assembles them, over a store, a clock the test moves and a
/// ``ScriptedProvider``: no socket. The store is the embedded one in memory, or three instances on
/// one PostgreSQL database taking the calls in turn (``RoundRobinStore``): every step of a flow on
/// another instance, as behind a balancer without stickiness.
struct FlowTestBed {
    static let app = "demo-app"
    static let redirectURI = "com.example.app:/done"
    static let callbackURL = "https://broker.test/callback"

    let clock = TestClock(Date(timeIntervalSince1970: 1_800_000_000))
    let provider: ScriptedProvider
    /// The store: the embedded one, or three PostgreSQL instances; either can be told to fail
    /// (``RoundRobinStore/failNextSessionLookup()``).
    let store: RoundRobinStore
    /// The broker's services as `serve` assembles them (``BrokerServices/assemble(_:store:providers:upstream:trust:logger:metrics:now:)``).
    let services: BrokerServices
    let settings: SessionSettings
    /// What the audit trail recorded, in order (the services log to it).
    let audit: AuditLines

    var login: LoginFlow { services.login }
    var sessions: SessionOperations { services.sessions }
    var endings: GrantEndings { services.endings }

    init(_ kind: StoreKind = .embedded, settings: SessionSettings = SessionSettings()) async throws {
        self.settings = settings
        provider = try ScriptedProvider.make(clock: clock)
        let audit = AuditLines()
        self.audit = audit
        let logger = Logger(label: "test") { _ in audit }
        let lifetimes = settings.lifetimes
        switch kind {
        case .embedded:
            store = RoundRobinStore([EmbeddedStateStore(lifetimes: lifetimes, clock: clock.closure, logger: logger)])
        case .postgres:
            let harness = try PostgresStoreHarness(lifetimes: lifetimes)
            var instances: [any StateStore] = []
            for _ in 0..<3 { instances.append(try await harness.open(clock: clock)) }
            store = RoundRobinStore(instances)
        }
        let config = try Self.config(settings)
        services = try BrokerServices.assemble(
            config, store: store, providers: ProviderDirectory(providers: config.providers, discovery: DiscoveryCache(client: provider)),
            upstream: provider, trust: try ProviderTrust(config.providers), logger: logger, metrics: BrokerMetrics(), now: clock.closure
        )
    }

    /// The test app (device flow allowed) at the scripted provider, public URL
    /// `https://broker.test`, no rate limits.
    static func config(_ settings: SessionSettings) throws -> BrokerConfig {
        let app = AppConfig(id: Self.app, redirectURIs: [try RedirectURI(parsing: Self.redirectURI)], deviceFlow: true)
        let unlimited = Limits(loginRequestsPerMinute: 0, tokenRequestsPerMinute: 0, refreshRequestsPerMinute: 0, deviceCodeEntriesPerMinute: 0,
                               deviceCodeMissesPerMinute: 0, proxyRequestsPerMinute: 0)
        return BrokerConfig(server: ServerConfig(publicURL: URL(string: "https://broker.test"), limits: unlimited), sessions: settings,
                            providers: [ScriptedProvider.config()], apps: [app])
    }

    /// The session `id` as the store holds it now (an instance's cache may lag another's change
    /// by a notification; the test asks the store itself).
    func stored(_ id: SHA256Digest) async throws -> Session? {
        store.holdsEverySession ? store.session(id, now: clock.seconds) : try await store.loadSession(id, now: clock.seconds)
    }

    /// Releases the store (the PostgreSQL instances' connections).
    func close() async {
        await store.close()
    }

    /// Runs `body`, then closes the bed — awaited, whether `body` returns or throws, so that no
    /// store outlives its test.
    func closing(_ body: () async throws -> Void) async throws {
        do {
            try await body()
            await close()
        } catch {
            await close()
            throw error
        }
    }

    /// A login request of the test app, for a new session or (with `session`) more scopes.
    func request(scopes: [String] = [], session: Session? = nil, challenge: String) -> LoginRequest {
        let back = AppReturn(redirectURI: Self.redirectURI, state: "app-state", challenge: challenge)
        guard let session else { return LoginRequest(provider: "idp", app: Self.app, scopes: scopes, loginHint: nil, prompt: nil, purpose: .app(back)) }
        return .incremental(of: session, adding: scopes, app: Self.app, back: back, loginHint: nil, prompt: nil)
    }

    /// `begin`, the user's sign-in as `subject`, and `complete`: what the app's redirect URI gets.
    func signIn(subject: String = "alice", scopes: [String] = [], session: Session? = nil, verifier: String,
                issuer: String? = ScriptedProvider.issuer) async throws -> LoginCompletion {
        let provider = try await login.providers.resolve("idp")
        let url = try await login.begin(request(scopes: scopes, session: session, challenge: PKCE.challenge(for: verifier)), at: provider)
        let (code, state) = try self.provider.signIn(url, subject: subject)
        guard let pending = try await login.takeLogin(state: state) else { throw ScriptError("the login was not stored") }
        return await login.complete(pending, state: state, with: CallbackAnswer(code: code, error: nil, errorDescription: nil, issuer: issuer))
    }

    /// A whole sign-in and redemption: the new session and its token.
    func newSession(subject: String = "alice") async throws -> RedeemedSession {
        let verifier = PKCE.makeVerifier()
        let completion = try await signIn(subject: subject, verifier: verifier)
        guard let code = completion.handoffCode else { throw ScriptError("sign-in failed: \(completion)") }
        return try await login.redeem(HandoffRedemptionRequest(code: code, verifier: verifier, redirectURI: Self.redirectURI, app: Self.app))
    }
}

extension LoginCompletion {
    /// The refusal, whichever the purpose; nil when the login succeeded.
    var refusal: LoginRefusal? {
        switch self {
        case .app(_, .refused(let refusal)), .device(_, .refused(let refusal)): refusal
        case .app(_, .handoff), .device(_, .signedIn): nil
        }
    }

    /// The handoff code an app's login ended with; nil for a refusal or a device login.
    var handoffCode: String? {
        guard case .app(_, .handoff(let code)) = self else { return nil }
        return code
    }
}
