/// The broker's whole configuration, validated: what ``ConfigLoader`` answers.
public struct BrokerConfig: Sendable {
    /// HTTP server settings.
    public var server: ServerConfig
    /// Logging settings.
    public var log: LogConfig
    /// Lifetimes of sessions, logins and handoff codes; refresh and cache timing.
    public var sessions: SessionSettings
    /// Where the state is kept on disk, and the keys that encrypt it.
    public var state: StateSettings
    /// Where to report sessions that end or keep failing to refresh; nil: nowhere.
    public var webhooks: WebhookSettings?
    /// Identity providers, sorted by id.
    public private(set) var providers: [ProviderConfig]
    /// Registered apps, sorted by id.
    public private(set) var apps: [AppConfig]

    /// Creates a configuration; providers and apps are sorted by id. The loader validates its
    /// input; this initializer does not.
    public init(server: ServerConfig, log: LogConfig, sessions: SessionSettings = SessionSettings(),
                state: StateSettings = StateSettings(), webhooks: WebhookSettings? = nil,
                providers: [ProviderConfig], apps: [AppConfig]) {
        self.server = server
        self.log = log
        self.sessions = sessions
        self.state = state
        self.webhooks = webhooks
        self.providers = providers.sorted { $0.id < $1.id }
        self.apps = apps.sorted { $0.id < $1.id }
    }

    /// The embedded defaults: listen on 127.0.0.1:8080, one thread per core, 10 s shutdown
    /// grace, the default limits, `info` logs in the automatic format with access lines, the
    /// default session lifetimes, state in `state/` with no keys read, and no providers or apps.
    public static let defaults = BrokerConfig(
        server: ServerConfig(listen: ListenAddress(host: "127.0.0.1", port: 8080)),
        log: LogConfig(),
        providers: [],
        apps: []
    )

    /// The provider with this id.
    public func provider(id: String) -> ProviderConfig? {
        providers.first { $0.id == id }
    }

    /// The app with this id.
    public func app(id: String) -> AppConfig? {
        apps.first { $0.id == id }
    }
}
