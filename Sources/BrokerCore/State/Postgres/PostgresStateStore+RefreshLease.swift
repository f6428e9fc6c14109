import BrokerCrypto
import Postgres

/// A session's refresh across instances (docs/several-instances.md): its advisory lock, its
/// lease, and how long an update keeps trying through a lost connection under it.
extension PostgresStateStore {
    /// How long an update keeps trying through a lost connection.
    private static let updatePatience = Duration.seconds(3)
    /// How long a refresh's rotated tokens keep being offered to the database after its lease ran
    /// out (a failover can take a minute): written only while no other instance holds a lease.
    private static let afterLeasePatience = Duration.seconds(60)

    /// How long an update keeps trying through a lost connection, from now: under a refresh's
    /// `lease`, until ``afterLeasePatience`` past the lease's end (past the end, it is written
    /// only while no other instance holds a lease).
    static func patience(under lease: RefreshLease.Held?) -> Duration {
        guard let lease else { return updatePatience }
        return max(.zero, lease.until + afterLeasePatience - ContinuousClock.now)
    }

    /// The session's advisory lock, then its refresh lease, then `refresh` with the lease. The
    /// lock hands the refresh from one instance to the next at once, but goes with its connection
    /// — also when PostgreSQL restarts while the holder, alive, waits for the provider. The lease
    /// is a committed row saying a refresh is under way until a time (the database's clock): the
    /// next instance waits for it to be released or to run out, so that it never sends the
    /// provider a refresh token the holder may just have rotated (a provider that detects reuse
    /// would end the grant). A holder that died leaves its lease to run out:
    /// ``refreshLockWaitSeconds``, longer than a provider call may take.
    func whileRefreshing<T: Sendable>(_ id: SHA256Digest, _ refresh: (RefreshLease) async -> T) async throws(StateWriteError) -> T {
        let key = id.withUnsafeBytes { $0.loadUnaligned(as: Int64.self) }
        let asked = ContinuousClock.now
        let outcome: Result<T, StateWriteError>
        do {
            outcome = try await lockPool.withAdvisoryLock(key, waitSeconds: refreshLockWaitSeconds) { () async -> Result<T, StateWriteError> in
                let lease: RefreshLease.Held
                do throws(StateWriteError) {
                    lease = try await takeRefreshLease(id)
                } catch {
                    return .failure(error)
                }
                metrics?.refreshLockWaited(seconds: (ContinuousClock.now - asked).seconds)
                let value = await refresh(RefreshLease(session: id, held: lease))
                await releaseRefreshLease(lease, of: id)
                return .success(value)
            }
        } catch {
            throw StateWriteError(description: "the session's refresh lock: \(error.description)")
        }
        return try outcome.get()
    }

    /// Records this instance's refresh of `id` (committed before the provider is asked), waiting
    /// while another instance's lease on it holds. Its end by this instance's clock is reckoned
    /// from when the attempt that took it began (the lease lasts ``refreshLockWaitSeconds`` from a
    /// moment after it).
    private func takeRefreshLease(_ id: SHA256Digest) async throws(StateWriteError) -> RefreshLease.Held {
        let seconds = Double(refreshLockWaitSeconds)
        let deadline = ContinuousClock.now + .seconds(refreshLockWaitSeconds + 1)
        while true {
            let attempted = ContinuousClock.now
            let taken = try await write { connection throws(PostgresError) -> Double? in
                let rows = try connection.execute("""
                    INSERT INTO broker_refresh_leases (session_id, held_until) VALUES ($1, extract(epoch FROM clock_timestamp()) + $2)
                    ON CONFLICT (session_id) DO UPDATE SET held_until = excluded.held_until
                    WHERE broker_refresh_leases.held_until <= extract(epoch FROM clock_timestamp())
                    RETURNING held_until
                    """, [.bytes(id.bytes), .double(seconds)])
                return rows.count == 1 ? rows.double(0, 0) : nil
            }
            if let record = taken {
                return RefreshLease.Held(until: attempted + .seconds(refreshLockWaitSeconds), record: record)
            }
            guard ContinuousClock.now < deadline else {
                throw StateWriteError(description: "the session's refresh lease: another instance's refresh has not ended")
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Ends this instance's lease — not another instance's that followed it once it ran out; if
    /// the database cannot be reached, it runs out.
    private func releaseRefreshLease(_ lease: RefreshLease.Held, of id: SHA256Digest) async {
        _ = try? await write { connection throws(PostgresError) in
            try connection.execute("SET LOCAL synchronous_commit = off")
            try connection.execute("DELETE FROM broker_refresh_leases WHERE session_id = $1 AND held_until = $2",
                                   [.bytes(id.bytes), .double(lease.record)])
        }
    }
}

extension RefreshLease.Held {
    /// Locks the lease row first in an update's transaction under this lease: an instance taking
    /// the lease meanwhile waits for the update, then reads the row it leaves (not the one before).
    func lockRow(of session: SHA256Digest, on connection: PostgresConnection) throws(PostgresError) {
        try connection.execute("SELECT 1 FROM broker_refresh_leases WHERE session_id = $1 FOR UPDATE", [.bytes(session.bytes)])
    }

    /// What an update of the session whose id is the parameter `session` adds to its `WHERE`
    /// under this lease: no other instance holds a live lease on it (past this one's end, another
    /// may have taken one, and its refresh is then the session's).
    func noOtherLiveLease(on session: String, _ parameters: inout SQLParameters) -> String {
        """
         AND NOT EXISTS (SELECT 1 FROM broker_refresh_leases WHERE session_id = \(session)
            AND held_until > extract(epoch FROM clock_timestamp()) AND held_until <> \(parameters(.double(record))))
        """
    }
}
