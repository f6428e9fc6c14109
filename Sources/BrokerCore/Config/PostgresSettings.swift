/// Which store keeps the broker's state: `state.backend`.
public enum StateBackend: String, Sendable, Equatable, CaseIterable {
    /// Memory, an encrypted journal and snapshots in `state.directory`: one broker instance.
    case embedded
    /// PostgreSQL, shared by several broker instances (docs/several-instances.md).
    case postgres
}

/// The PostgreSQL store: the `state.postgres` section, read when `state.backend` is `postgres`.
///
/// Printing it never shows the password (see ``Secret``).
public struct PostgresSettings: Sendable, Equatable {
    /// A libpq connection URI, `postgres://USER@HOST:PORT/DATABASE?sslmode=verify-full`, without
    /// a password (refused there); TLS parameters (`sslmode`, `sslrootcert`, …) are libpq's.
    public var url: String?
    /// The password, from `password_env` or `password_file`; nil for password-less
    /// authentication (certificates, peer, trust).
    public var password: Secret?
    /// Connections each instance opens.
    public var poolSize: Int
    /// Longest any statement may run before the database cancels it.
    public var statementTimeoutSeconds: Int
    /// Most sessions each instance keeps decrypted in memory; the database holds them all.
    public var cacheSessions: Int

    /// Creates PostgreSQL settings; the defaults are those of the embedded configuration.
    public init(url: String? = nil, password: Secret? = nil, poolSize: Int = 8, statementTimeoutSeconds: Int = 5,
                cacheSessions: Int = 100_000) {
        self.url = url
        self.password = password
        self.poolSize = poolSize
        self.statementTimeoutSeconds = statementTimeoutSeconds
        self.cacheSessions = cacheSessions
    }

    public static func == (lhs: PostgresSettings, rhs: PostgresSettings) -> Bool {
        lhs.url == rhs.url && lhs.password?.reveal() == rhs.password?.reveal() && lhs.poolSize == rhs.poolSize
            && lhs.statementTimeoutSeconds == rhs.statementTimeoutSeconds && lhs.cacheSessions == rhs.cacheSessions
    }

    /// The environment variable holding the password when neither `password_env` nor
    /// `password_file` is configured (and it is set).
    public static let defaultPasswordVariable = "BROKER_POSTGRES_PASSWORD"
    /// The environment variable naming a file that holds the password, in the same case.
    public static let defaultPasswordFileVariable = "BROKER_POSTGRES_PASSWORD_FILE"

    /// Accepted range of `pool_size`.
    static let poolSizeRange = 1...200
    /// Accepted range of `statement_timeout_seconds`.
    static let statementTimeoutSecondsRange = 1...300
    /// Accepted range of `cache_sessions`.
    static let cacheSessionsRange = 100...100_000_000

    /// Why `text` is not a usable connection URL; nil when it is.
    static func urlProblem(_ text: String) -> String? {
        guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") else {
            return "must be a postgres:// or postgresql:// URL"
        }
        let afterScheme = text.drop { $0 != "/" }.dropFirst(2)
        let authority = afterScheme.prefix { $0 != "/" && $0 != "?" }
        if let at = authority.lastIndex(of: "@"), authority[..<at].contains(":") {
            return "must not hold a password: set state.postgres.password_env or password_file"
        }
        if text.contains("password=") { return "must not hold a password: set state.postgres.password_env or password_file" }
        return nil
    }
}
