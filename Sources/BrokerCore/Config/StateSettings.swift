/// Where and how the broker keeps its state: the `state` section.
///
/// Printing it never shows a key: ``StateKeys`` prints only its key ids.
public struct StateSettings: Sendable, Equatable {
    /// The directory holding the encrypted snapshot and journal, as configured; a relative path
    /// is taken from the working directory.
    public var directory: String
    /// The keys that encrypt the state, read when the configuration was loaded; `nil` when the
    /// variable is unset or the file does not exist. Whether the broker may run without them
    /// (development mode) is decided where it starts.
    public var keys: StateKeys?
    /// Where the keys come from, for messages: `env BROKER_STATE_KEY` or
    /// `file /run/secrets/state-key` (a file's path made absolute).
    public var keySource: String
    /// The state key file's absolute path, when the keys come from `state.key_file`.
    public var keyFile: String?
    /// Seconds between two snapshots.
    public var snapshotIntervalSeconds: Double
    /// A snapshot is also taken when the journal grows past this many bytes.
    public var journalMaxBytes: Int
    /// Which store keeps the state; the keys encrypt it in either.
    public var backend: StateBackend
    /// The PostgreSQL store's settings (`backend: postgres`).
    public var postgres: PostgresSettings

    /// Creates state settings; the defaults are those of the embedded configuration, without keys.
    public init(directory: String = "state", keys: StateKeys? = nil,
                keySource: String = "env \(StateSettings.defaultKeyVariable)",
                snapshotIntervalSeconds: Double = 300, journalMaxBytes: Int = 67_108_864,
                backend: StateBackend = .embedded, postgres: PostgresSettings = PostgresSettings()) {
        self.directory = directory
        self.keys = keys
        self.keySource = keySource
        self.snapshotIntervalSeconds = snapshotIntervalSeconds
        self.journalMaxBytes = journalMaxBytes
        self.backend = backend
        self.postgres = postgres
    }

    /// The environment variable holding the state keys when neither `key_env` nor `key_file`
    /// is configured.
    public static let defaultKeyVariable = "BROKER_STATE_KEY"

    /// Accepted range of `snapshot_interval_seconds`: one second to one day.
    static let snapshotIntervalSecondsRange = 1.0...86_400.0
    /// Accepted range of `journal_max_bytes`: 1 MiB to 4 GiB.
    static let journalMaxBytesRange = 1_048_576...4_294_967_296
}
