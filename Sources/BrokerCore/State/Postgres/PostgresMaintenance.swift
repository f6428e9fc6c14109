import Foundation
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
            let schema = try await PostgresSchema.migrate(pool)
            if schema.newerButReadable {
                return "schema version \(schema.version), newer than this broker's (\(PostgresSchema.latest)), which may run on it: nothing to apply"
            }
            return schema.applied.isEmpty
                ? "schema version \(PostgresSchema.latest): up to date"
                : "schema version \(PostgresSchema.latest): applied \(schema.applied.map(String.init).joined(separator: ", "))"
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
        let lifetimes = config.sessions.lifetimes
        let sessions = try readSessions(directory, keys: keys)
        let target: PostgresStateStore
        do {
            target = try await PostgresStateStore.open(settings: config.state.postgres, keys: keys, lifetimes: lifetimes,
                                                       refreshLockWaitSeconds: 15, clock: systemClock, logger: logger)
        } catch {
            throw Failure(description: error.description)
        }
        let now = systemClock()
        let live = sessions.filter { lifetimes.isLive($0, now: now) }
        var copied = 0
        // 500 a transaction: one commit (and its flush) per batch, not per session.
        for start in stride(from: 0, to: live.count, by: 500) {
            do {
                copied += try await target.importSessions(Array(live[start..<min(start + 500, live.count)]))
            } catch {
                await target.close()
                throw Failure(description: "after \(copied) sessions: \(error.description)")
            }
        }
        let present = live.count - copied
        await target.close()
        return "imported \(copied) sessions from \(directory); \(present) were there already"
    }

    /// The sessions an embedded state directory holds, read the way a start reads them, without
    /// changing a byte of it: a failed or repeated import leaves the old broker its own state to
    /// roll back to.
    private static func readSessions(_ directory: String, keys: StateKeys) throws(Failure) -> [Session] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw Failure(description: "\(directory) is not a directory: nothing to import (--from names a broker's state.directory)")
        }
        guard StateRecovery.holdsState(directory) else {
            throw Failure(description: "\(directory) holds no broker state (no \(SnapshotWriter.fileName), no journal): nothing to import")
        }
        // Held while the files are read: a broker cannot start on them meanwhile.
        let lock: Int32?
        do {
            lock = try StateDirectoryLock.acquireForReading(directory)
        } catch {
            throw Failure(description: error.description)
        }
        defer { if let lock { close(lock) } }
        var sessions: [SHA256Digest: Session] = [:]
        do {
            try StateRecovery.read(directory: directory, keys: keys) { record in
                switch record {
                case .session(let session): sessions[session.id] = session
                case .sessionRemoved(let id): sessions[id] = nil
                default: break
                }
            }
        } catch {
            throw Failure(description: "\(error.description)\nNothing was imported, and \(directory) is as it was.")
        }
        return Array(sessions.values)
    }
}
