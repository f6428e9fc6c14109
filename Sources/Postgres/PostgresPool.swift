import Dispatch
import Foundation
import Synchronization

/// Connections to PostgreSQL, each owned by a thread of its own: libpq blocks, so its calls
/// never run on Swift's cooperative threads nor on the caller's. A call waits in line for a
/// free connection (at most `acquireTimeout`), runs on that connection's thread, and its result
/// is handed back to the awaiting task. A connection that broke is replaced on its next use, so
/// the pool comes back by itself when the database does.
public final class PostgresPool: Sendable {
    private struct Job: Sendable {
        let enqueued: ContinuousClock.Instant
        let run: @Sendable (Result<PostgresConnection, PostgresError>) -> Void
    }

    private let options: PostgresConnection.Options
    private let acquireTimeout: Duration
    private let jobs = Mutex<(queue: [Job], closed: Bool)>(([], false))
    private let available = DispatchSemaphore(value: 0)
    private let size: Int
    /// Calls waiting for or running on a connection, for the metrics.
    private let busy = Atomic<Int>(0)

    public init(options: PostgresConnection.Options, size: Int, acquireTimeout: Duration) {
        self.options = options
        self.size = size
        self.acquireTimeout = acquireTimeout
        for index in 0..<size {
            let thread = Thread { [self] in work() }
            thread.name = "postgres-\(index)"
            thread.start()
        }
    }

    /// Runs `body` with a connection, on that connection's thread.
    public func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        busy.wrappingAdd(1, ordering: .relaxed)
        defer { busy.wrappingSubtract(1, ordering: .relaxed) }
        let result: Result<T, PostgresError> = await withCheckedContinuation { continuation in
            let job = Job(enqueued: .now) { connection in
                continuation.resume(returning: connection.flatMap { connection in Result { () throws(PostgresError) in try body(connection) } })
            }
            let accepted = jobs.withLock { jobs in
                guard !jobs.closed else { return false }
                jobs.queue.append(job)
                return true
            }
            if accepted { available.signal() } else { continuation.resume(returning: .failure(.closed)) }
        }
        return try result.get()
    }

    /// Runs `body` in a transaction (committed when it returns, rolled back when it throws).
    public func transaction<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        try await withConnection { connection throws(PostgresError) in try connection.transaction(body) }
    }

    /// Calls waiting for or holding a connection now.
    public var callsInFlight: Int { busy.load(ordering: .relaxed) }

    /// Stops the threads once the calls already in line are done; later calls fail `.closed`.
    public func close() {
        jobs.withLock { $0.closed = true }
        for _ in 0..<size { available.signal() }
    }

    /// A worker: takes calls in order, (re)connecting when its connection is missing or broken.
    /// After a failed connect it waits before taking the next call (50 ms, doubling up to 1 s),
    /// while the other workers go on: a database coming back is not met by a storm of
    /// connection attempts, and is used again within a second.
    private func work() {
        var connection: PostgresConnection?
        var backoff = 0.0
        while true {
            available.wait()
            guard let job = jobs.withLock({ jobs in jobs.queue.isEmpty ? nil : jobs.queue.removeFirst() }) else {
                if jobs.withLock({ $0.closed }) { return }
                continue
            }
            if ContinuousClock.now - job.enqueued > acquireTimeout {
                job.run(.failure(.timeout))
                continue
            }
            if connection?.isAliveAfterIdle() != true {
                connection = nil
                do {
                    connection = try PostgresConnection(options)
                    backoff = 0
                } catch {
                    job.run(.failure(error))
                    backoff = min(1, max(0.05, backoff * 2))
                    Thread.sleep(forTimeInterval: backoff)
                    continue
                }
            }
            if let connection { job.run(.success(connection)) }
        }
    }
}
