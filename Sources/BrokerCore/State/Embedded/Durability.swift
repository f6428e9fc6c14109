import Synchronization

/// A change on its way to disk: `wait()` returns once it is durable (or failed to be).
final class DurabilityTicket: Sendable {
    private struct State {
        var result: Result<Void, StateWriteError>?
        var waiter: CheckedContinuation<Result<Void, StateWriteError>, Never>?
    }

    private let state = Mutex(State())

    /// A ticket for a change that needs no disk (no journal configured).
    static let immediate: DurabilityTicket = {
        let ticket = DurabilityTicket()
        ticket.resolve(.success(()))
        return ticket
    }()

    func resolve(_ result: Result<Void, StateWriteError>) {
        let waiter = state.withLock { state in
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: result)
    }

    func wait() async throws(StateWriteError) {
        let result = await withCheckedContinuation { continuation in
            let ready: Result<Void, StateWriteError>? = state.withLock { state in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
        try result.get()
    }
}

/// Where state changes are recorded so that they survive a restart. Changes are handed over
/// while the in-memory change is still under its lock, so the log's order is the order the
/// changes were made in.
protocol ChangeLog: Sendable {
    func enqueue(_ records: [StateRecord]) -> DurabilityTicket
}

/// A change log that keeps nothing: the state lives in memory only (development mode without a
/// state key, and stores filled before their journal exists).
struct NoChangeLog: ChangeLog {
    func enqueue(_ records: [StateRecord]) -> DurabilityTicket { .immediate }
}

/// A change log that can be replaced once: stores are filled from disk before the journal that
/// will record their later changes exists.
final class SwitchableLog: ChangeLog {
    private let target = Mutex<any ChangeLog>(NoChangeLog())

    func switchTo(_ log: any ChangeLog) {
        target.withLock { $0 = log }
    }

    func enqueue(_ records: [StateRecord]) -> DurabilityTicket {
        target.withLock { $0.enqueue(records) }
    }
}
