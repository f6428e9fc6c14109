import Synchronization

/// Requests whose handler answers later. Each is answered exactly once: by its own task, or by
/// the shutdown when the grace period runs out. Whoever claims an entry first answers it.
final class DeferredRequests: Sendable {
    private struct Entries {
        var next = 0
        var byTicket: [Int: ShimRequest] = [:]
        /// After `claimAll`: the shutdown has answered the waiting; nothing new may wait.
        var closed = false
    }

    private let entries = Mutex(Entries())

    /// Registers a deferred request; the ticket claims it later. Nil once the shutdown has
    /// answered the waiting requests: the request must be answered at once instead.
    func add(_ request: ShimRequest) -> Int? {
        entries.withLock { entries in
            guard !entries.closed else { return nil }
            entries.next += 1
            entries.byTicket[entries.next] = request
            return entries.next
        }
    }

    /// Takes the request for `ticket`, or nil when the shutdown already answered it.
    func claim(_ ticket: Int) -> ShimRequest? {
        entries.withLock { $0.byTicket.removeValue(forKey: ticket) }
    }

    /// Takes every request still waiting, and closes the list.
    func claimAll() -> [ShimRequest] {
        entries.withLock { entries in
            entries.closed = true
            defer { entries.byTicket.removeAll() }
            return Array(entries.byTicket.values)
        }
    }
}
