import BrokerCrypto
import Logging
import Postgres

/// What `token-broker state migrate` and `state import` do: bring the database's schema up to
/// date explicitly (brokers also do it at start), and copy an embedded state directory's live
/// sessions into PostgreSQL, to move an existing deployment to several instances.
public enum PostgresMaintenance {
    /// Why a maintenance command failed.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Applies the migrations the database lacks; a line saying what was done.
    public static func migrate(_ config: BrokerConfig) async throws(Failure) -> String {
        guard config.state.backend == .postgres, let url = config.state.postgres.url else {
            throw Failure(description: "state.backend is not postgres: the embedded store has no schema to migrate")
        }
        let pool = PostgresPool(
            options: PostgresConnection.Options(url: url, password: config.state.postgres.password?.reveal(),
                                                statementTimeoutSeconds: config.state.postgres.statementTimeoutSeconds),
            size: 1, acquireTimeout: .seconds(30)
        )
        defer { pool.close() }
        do {
            let applied = try await PostgresSchema.migrate(pool)
            return applied.isEmpty
                ? "schema version \(PostgresSchema.latest): up to date"
                : "schema version \(PostgresSchema.latest): applied \(applied.map(String.init).joined(separator: ", "))"
        } catch {
            throw Failure(description: error.description)
        }
    }

    /// Copies the live sessions of the embedded state in `directory` (read with the configured
    /// keys; the directory is locked meanwhile, so no broker may be running on it) into the
    /// PostgreSQL store `config` names. Sessions already there are kept as they are, so an
    /// interrupted import can be run again. Logins in progress and handoff codes are not copied:
    /// they live minutes, and their users sign in again.
    public static func importDirectory(_ directory: String, into config: BrokerConfig) async throws(Failure) -> String {
        guard config.state.backend == .postgres else { throw Failure(description: "state.backend is not postgres: nothing to import into") }
        guard let keys = config.state.keys else { throw Failure(description: "no state key: the directory cannot be read, nor rows sealed") }
        let logger = Logger(label: "token-broker") { _ in SwiftLogNoOpLogHandler() }
        let lifetimes = SessionLifetimes(idle: config.sessions.idleLifetimeSeconds, absolute: config.sessions.absoluteLifetimeSeconds)
        var settings = config.state
        settings.directory = directory
        let source: EmbeddedStateStore
        do {
            source = try EmbeddedStateStore(settings: settings, keys: keys, lifetimes: lifetimes, acceptDamage: false, clock: systemClock, logger: logger)
        } catch {
            throw Failure(description: error.description)
        }
        let target: PostgresStateStore
        do {
            target = try await PostgresStateStore.open(settings: config.state.postgres, keys: keys, lifetimes: lifetimes,
                                                       refreshLockWaitSeconds: 15, clock: systemClock, logger: logger)
        } catch {
            await source.close()
            throw Failure(description: error.description)
        }
        let now = systemClock()
        let live = source.sessions.capture().flatMap { $0.values }.filter { lifetimes.isLive($0, now: now) }
        var copied = 0
        // 500 a transaction: one commit (and its flush) per batch, not per session.
        for start in stride(from: 0, to: live.count, by: 500) {
            do {
                copied += try await target.importSessions(Array(live[start..<min(start + 500, live.count)]))
            } catch {
                await target.close()
                await source.close()
                throw Failure(description: "after \(copied) sessions: \(error.description)")
            }
        }
        let present = live.count - copied
        await target.close()
        await source.close()
        return "imported \(copied) sessions from \(directory); \(present) were there already"
    }
}
