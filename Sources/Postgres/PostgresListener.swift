internal import CLibPQ
import Foundation
import Synchronization
#if canImport(Glibc)
internal import Glibc
#endif

/// Listens on one PostgreSQL notification channel (`LISTEN`) on a connection and a thread of
/// its own, and hands every payload to `onNotification`. Each time it starts listening — the
/// first time, and after a dropped connection (reconnecting, backing off up to 5 s) — it calls
/// `onListening`: notifications sent before were missed, and whatever they would have
/// invalidated must be dropped (`resumed`: after a drop). When a listening connection drops, it
/// calls `onDropped` with why.
public final class PostgresListener: Sendable {
    private let stopped = Atomic<Bool>(false)
    private let connected = Atomic<Bool>(false)

    public init(
        options: PostgresConnection.Options, channel: String,
        onNotification: @escaping @Sendable (String) -> Void, onListening: @escaping @Sendable (_ resumed: Bool) -> Void,
        onDropped: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        let thread = Thread { [self] in listen(options, channel, onNotification, onListening, onDropped) }
        thread.name = "postgres-listen"
        thread.start()
    }

    /// Whether the listening connection is up now.
    public var isListening: Bool { connected.load(ordering: .relaxed) }

    /// Stops listening within a second.
    public func stop() {
        stopped.store(true, ordering: .relaxed)
    }

    private func listen(
        _ options: PostgresConnection.Options, _ channel: String,
        _ onNotification: @Sendable (String) -> Void, _ onListening: @Sendable (_ resumed: Bool) -> Void,
        _ onDropped: @Sendable (String) -> Void
    ) {
        var backoff = 0.1
        var first = true
        while !stopped.load(ordering: .relaxed) {
            guard let connection = try? PostgresConnection(options), (try? connection.execute("LISTEN \(channel)")) != nil else {
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(5, backoff * 2)
                continue
            }
            backoff = 0.1
            onListening(!first)
            connected.store(true, ordering: .relaxed)
            first = false
            let socket = PQsocket(connection.handle)
            while !stopped.load(ordering: .relaxed) && connection.isHealthy {
                var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 1000) >= 0 else { continue }
                guard descriptor.revents != 0 else { continue }
                guard PQconsumeInput(connection.handle) == 1 else { break }
                while let notification = PQnotifies(connection.handle) {
                    onNotification(String(cString: notification.pointee.extra))
                    PQfreemem(notification)
                }
            }
            connected.store(false, ordering: .relaxed)
            if !stopped.load(ordering: .relaxed) { onDropped("PostgreSQL is unreachable: the notification connection dropped") }
        }
    }
}
