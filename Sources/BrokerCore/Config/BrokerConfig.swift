/// The broker's whole configuration, validated: what ``ConfigLoader`` answers.
///
/// This is the one configuration model. Each default is written once, as a default argument of
/// the initializer of the section it belongs to (``ServerConfig``, ``Limits``, ``LogConfig``,
/// ``SessionSettings``, ``StateSettings``, ``WebhookSettings``), so `BrokerConfig()` is the
/// embedded configuration. The other two shapes take their values from here and write none:
///
/// - `ConfigDraft` is the configuration while the file and the environment are read. It exists
///   because some settings are not yet final there: the public URL is derived from `listen` only
///   when none was given, the TLS files and the webhook URL and secret arrive one key at a time
///   and are checked together, and each value remembers its file line for messages. It starts
///   from ``defaults`` and ends in `finish()`, which builds this model.
/// - HTTPServer's `ServerConfiguration` is what the transport needs: it has no defaults and is
///   built from ``ServerConfig`` in one function, `ServerConfig.serverConfiguration()`.
///
/// `ConfigSetting` is the one table of keys, `BROKER_*` variables and descriptions; README's
/// Configuration table and `config/example.yaml` state the same defaults, and
/// `ConfigDefaultsTests` fails when any of them, or the transport's, differs from this model.
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
    /// The admin API; nil: off.
    public var admin: AdminSettings?
    /// The backends that may introspect session tokens (`POST /introspect`), sorted by id.
    public private(set) var resourceServers: [ResourceServerConfig]
    /// Identity providers, sorted by id.
    public private(set) var providers: [ProviderConfig]
    /// Registered apps, sorted by id.
    public private(set) var apps: [AppConfig]

    /// Creates a configuration; providers and apps are sorted by id. The loader validates its
    /// input; this initializer does not.
    public init(server: ServerConfig = ServerConfig(), log: LogConfig = LogConfig(),
                sessions: SessionSettings = SessionSettings(), state: StateSettings = StateSettings(),
                webhooks: WebhookSettings? = nil, admin: AdminSettings? = nil, resourceServers: [ResourceServerConfig] = [],
                providers: [ProviderConfig] = [], apps: [AppConfig] = []) {
        self.server = server
        self.log = log
        self.sessions = sessions
        self.state = state
        self.webhooks = webhooks
        self.admin = admin
        self.resourceServers = resourceServers.sorted { $0.id < $1.id }
        self.providers = providers.sorted { $0.id < $1.id }
        self.apps = apps.sorted { $0.id < $1.id }
    }

    /// The embedded configuration: every section's defaults, no webhooks, admin API, providers or apps.
    public static let defaults = BrokerConfig()

    /// The provider with this id.
    public func provider(id: String) -> ProviderConfig? {
        providers.first { $0.id == id }
    }

    /// The app with this id.
    public func app(id: String) -> AppConfig? {
        apps.first { $0.id == id }
    }
}
