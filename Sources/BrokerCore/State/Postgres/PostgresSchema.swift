import Postgres

/// The broker's tables in PostgreSQL and their migrations: numbered, applied in order in one
/// transaction under an advisory lock (so instances starting together apply each once), each
/// recorded in `broker_schema`. An instance refuses a database whose schema is newer than it
/// knows: an older broker must not write rows a newer one reads differently.
enum PostgresSchema {
    /// The advisory lock key migrations hold (`token-broker schema`).
    static let lockKey: Int64 = 0x746F_6B65_6E5F_7363

    /// Migration N is `migrations[N - 1]`, its statements in order. Never edit one that has
    /// shipped; add the next.
    static let migrations: [[String]] = [[
        """
        CREATE TABLE broker_sessions (
            id bytea PRIMARY KEY,
            version bigint NOT NULL,
            key_id bigint NOT NULL,
            sealed bytea NOT NULL,
            provider text NOT NULL,
            app text NOT NULL,
            created_at double precision NOT NULL,
            used_at double precision NOT NULL,
            expires_at double precision NOT NULL
        )
        """,
        "CREATE INDEX broker_sessions_expires_at ON broker_sessions (expires_at)",
        "CREATE INDEX broker_sessions_key_id ON broker_sessions (key_id)",
        """
        CREATE TABLE broker_logins (
            state bytea PRIMARY KEY,
            key_id bigint NOT NULL,
            sealed bytea NOT NULL,
            expires_at double precision NOT NULL
        )
        """,
        """
        CREATE TABLE broker_handoffs (
            code bytea PRIMARY KEY,
            key_id bigint NOT NULL,
            sealed bytea NOT NULL,
            expires_at double precision NOT NULL,
            redeemed boolean NOT NULL DEFAULT false,
            session_id bytea,
            replayed_before_binding boolean NOT NULL DEFAULT false
        )
        """,
    ], [
        // A refresh in progress, recorded before the provider is asked (see
        // PostgresStateStore.whileRefreshing): it outlives a lost connection, unlike the lock.
        """
        CREATE TABLE broker_refresh_leases (
            session_id bytea PRIMARY KEY,
            held_until double precision NOT NULL
        )
        """,
    ], [
        // Device codes (RFC 8628). `pending` rows are found by their user code, which only one
        // of them may have; the interval and the last poll are plain columns, changed by polls.
        """
        CREATE TABLE broker_device_codes (
            code bytea PRIMARY KEY,
            user_code bytea NOT NULL,
            pending boolean NOT NULL,
            key_id bigint NOT NULL,
            sealed bytea NOT NULL,
            expires_at double precision NOT NULL,
            poll_interval double precision NOT NULL,
            polled_at double precision
        )
        """,
        "CREATE UNIQUE INDEX broker_device_codes_user_code ON broker_device_codes (user_code) WHERE pending",
        "CREATE INDEX broker_device_codes_expires_at ON broker_device_codes (expires_at)",
    ], [
        // Sessions found by their provider subject or provider session (the admin API,
        // back-channel logout) through a blind index: keyed hashes, the values themselves stay
        // sealed. Rows written before have none (`subject_index IS NULL`) until re-sealing
        // indexes them; lookups open those too meanwhile.
        "ALTER TABLE broker_sessions ADD COLUMN subject_index bytea",
        "ALTER TABLE broker_sessions ADD COLUMN sid_index bytea",
        "CREATE INDEX broker_sessions_subject_index ON broker_sessions (subject_index)",
        "CREATE INDEX broker_sessions_sid_index ON broker_sessions (sid_index) WHERE sid_index IS NOT NULL",
        "CREATE INDEX broker_sessions_unindexed ON broker_sessions (id) WHERE subject_index IS NULL",
        // Tokens accepted once (back-channel logout tokens' `jti`), until they are too old anyway.
        """
        CREATE TABLE broker_spent_tokens (
            id bytea PRIMARY KEY,
            expires_at double precision NOT NULL
        )
        """,
        "CREATE INDEX broker_spent_tokens_expires_at ON broker_spent_tokens (expires_at)",
    ], [
        // The grant's lifecycle (docs/lifecycle.md). Handoff and device codes that hold a grant
        // say so, and whose it is (blind index), so that a sign-out finds them and a sweep revokes
        // what expired in them; a code's status is its sealed record's (the redeemed and
        // session_id columns are kept for brokers from before).
        "ALTER TABLE broker_handoffs ADD COLUMN holds_grant boolean NOT NULL DEFAULT false",
        "ALTER TABLE broker_handoffs ADD COLUMN subject_index bytea",
        "ALTER TABLE broker_handoffs ADD COLUMN sid_index bytea",
        "UPDATE broker_handoffs SET holds_grant = true WHERE NOT redeemed AND session_id IS NULL",
        "CREATE INDEX broker_handoffs_holding ON broker_handoffs (expires_at) WHERE holds_grant",
        "ALTER TABLE broker_device_codes ADD COLUMN holds_grant boolean NOT NULL DEFAULT false",
        "ALTER TABLE broker_device_codes ADD COLUMN subject_index bytea",
        "ALTER TABLE broker_device_codes ADD COLUMN sid_index bytea",
        // Unindexed until they move on: a sign-out opens them to see whose they are.
        "UPDATE broker_device_codes SET holds_grant = true WHERE NOT pending",
        "CREATE INDEX broker_device_codes_holding ON broker_device_codes (subject_index) WHERE holds_grant",
        // Revocations owed to providers, sealed, until each is confirmed; claimed by one instance
        // at a time for a delivery.
        """
        CREATE TABLE broker_revocations (
            id bytea PRIMARY KEY,
            key_id bigint NOT NULL,
            sealed bytea NOT NULL,
            provider text NOT NULL,
            due_at double precision NOT NULL,
            claimed_until double precision NOT NULL DEFAULT 0
        )
        """,
        "CREATE INDEX broker_revocations_due_at ON broker_revocations (due_at)",
        // Sign-outs remembered for the sign-ins under way when they came, by blind index.
        """
        CREATE TABLE broker_sign_outs (
            id bytea PRIMARY KEY,
            signed_in_before double precision NOT NULL,
            reason text NOT NULL,
            expires_at double precision NOT NULL
        )
        """,
        "CREATE INDEX broker_sign_outs_expires_at ON broker_sign_outs (expires_at)",
    ], [
        // Which brokers may run on the database at each version (``oldestReaders``).
        "ALTER TABLE broker_schema ADD COLUMN oldest_reader integer",
    ]]

    /// The newest version this build knows.
    static var latest: Int { migrations.count }

    /// From version 6 on, each version records in `broker_schema.oldest_reader` the oldest
    /// schema version whose brokers may still run on a database at this version: brokers of a
    /// rolling upgrade run side by side, and a rollback starts the older binary again without
    /// restoring the database. A version may name an older one when it and every version since
    /// that one only add (tables, or columns with defaults an older broker ignores) and remove or
    /// redefine nothing an older broker relies on; otherwise it names itself.
    /// (Version 6's declaration is read by brokers of 6 on; those of 5 and before refuse any newer
    /// schema.)
    static let oldestReaders: [Int: Int] = [6: 5]
    /// The first version whose row says who may read it.
    private static let firstDeclaring = 6

    /// What ``migrate(_:)`` did: the versions it applied, and the database's version after.
    struct Outcome {
        let applied: [Int]
        let version: Int
        /// The database is newer than this broker, and declares that it may run on it.
        var newerButReadable: Bool { version > latest }
    }

    /// Why migrating failed.
    struct Failure: Error, CustomStringConvertible {
        let description: String
        /// The database's schema is newer than this broker's: only a newer broker can use it.
        var newerSchema = false
    }

    /// Brings the schema to ``latest``, or accepts a newer one that declares this broker may run
    /// on it.
    @discardableResult
    static func migrate(_ pool: PostgresPool) async throws(Failure) -> Outcome {
        do {
            return try await pool.transaction { connection throws(PostgresError) -> Result<Outcome, Failure> in
                try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int(lockKey)])
                try connection.execute("CREATE TABLE IF NOT EXISTS broker_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
                let current = Int(try connection.execute("SELECT coalesce(max(version), 0) FROM broker_schema").int(0, 0) ?? 0)
                guard current <= latest else {
                    // Every version this broker does not know must let it read (a row without the
                    // declaration names its own version).
                    let oldest = try connection.execute("SELECT max(coalesce(oldest_reader, version)) FROM broker_schema WHERE version > $1",
                                                        [.int(Int64(latest))]).int(0, 0)
                    guard let oldest, oldest <= latest else {
                        return .failure(Failure(description: "the database's schema is version \(current), newer than this broker knows (\(latest)) "
                            + "and not readable by it: run a broker at least as new as the one that migrated it", newerSchema: true))
                    }
                    return .success(Outcome(applied: [], version: current))
                }
                var applied: [Int] = []
                for version in (current + 1)...max(current + 1, latest) where version <= latest {
                    for statement in migrations[version - 1] { try connection.execute(statement) }
                    if version >= firstDeclaring {
                        try connection.execute("INSERT INTO broker_schema (version, oldest_reader) VALUES ($1, $2)",
                                               [.int(Int64(version)), .int(Int64(oldestReaders[version] ?? version))])
                    } else {
                        try connection.execute("INSERT INTO broker_schema (version) VALUES ($1)", [.int(Int64(version))])
                    }
                    applied.append(version)
                }
                return .success(Outcome(applied: applied, version: max(current, latest)))
            }.get()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(description: "\(error)")
        }
    }
}
