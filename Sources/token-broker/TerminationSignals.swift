import Dispatch
import Foundation
import Synchronization

/// Waits for SIGTERM, SIGHUP or SIGINT. The signals' default action (dying at once) is turned
/// off when this is created, so a signal that arrives during start-up is still seen and handled.
/// SIGHUP (the terminal or the session that started the broker went away; or an operator who
/// expects a reload, which the broker does not do) stops it as SIGTERM does, drained and saved,
/// rather than at once with nothing saved since the last snapshot's journal.
struct TerminationSignals {
    private let sources: [any DispatchSourceSignal]
    private let waiter = SignalWaiter()

    init() {
        let queue = DispatchQueue(label: "token-broker.signals")
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGTERM, "SIGTERM"), (SIGHUP, "SIGHUP"), (SIGINT, "SIGINT")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [waiter] in waiter.deliver(name) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    /// The name of the next signal received.
    func next() async -> String {
        await waiter.next(within: nil) ?? "SIGTERM"
    }

    /// The name of the next signal received within `seconds`, or nil when none came.
    func next(within seconds: Double) async -> String? {
        await waiter.next(within: seconds)
    }
}

/// Hands each signal to whoever waits, in order; one waiter at a time.
private final class SignalWaiter: Sendable {
    private struct State {
        var received: [String] = []
        var continuation: CheckedContinuation<String?, Never>?
        /// Counts waits, so that a time-out ends only the wait it was set for.
        var wait = 0
    }

    private let state = Mutex(State())

    func next(within seconds: Double?) async -> String? {
        await withCheckedContinuation { continuation in
            enum Found { case signal(String), waiting(Int) }
            let found: Found = state.withLock { state in
                if !state.received.isEmpty { return .signal(state.received.removeFirst()) }
                state.continuation = continuation
                state.wait += 1
                return .waiting(state.wait)
            }
            switch found {
            case .signal(let name):
                continuation.resume(returning: name)
            case .waiting(let wait):
                guard let seconds else { return }
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
                    let expired: CheckedContinuation<String?, Never>? = state.withLock { state in
                        guard state.wait == wait, let waiting = state.continuation else { return nil }
                        state.continuation = nil
                        return waiting
                    }
                    expired?.resume(returning: nil)
                }
            }
        }
    }

    func deliver(_ name: String) {
        let continuation: CheckedContinuation<String?, Never>? = state.withLock { state in
            guard let waiting = state.continuation else {
                state.received.append(name)
                return nil
            }
            state.continuation = nil
            return waiting
        }
        continuation?.resume(returning: name)
    }
}
