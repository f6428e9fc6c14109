import Dispatch
import Foundation
import Synchronization

/// Waits for SIGTERM or SIGINT. The signals' default action (dying at once) is turned off when
/// this is created, so a signal that arrives during start-up is still seen and handled.
struct TerminationSignals {
    private let sources: [any DispatchSourceSignal]
    private let waiter = SignalWaiter()

    init() {
        let queue = DispatchQueue(label: "token-broker.signals")
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [waiter] in waiter.deliver(name) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    /// The name of the first signal received.
    func wait() async -> String {
        await waiter.wait()
    }
}

/// Hands the first signal to whoever waits, whichever comes first.
private final class SignalWaiter: Sendable {
    private struct State {
        var received: String?
        var continuation: CheckedContinuation<String, Never>?
    }

    private let state = Mutex(State())

    func wait() async -> String {
        await withCheckedContinuation { continuation in
            let ready: String? = state.withLock { state in
                if let received = state.received { return received }
                state.continuation = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func deliver(_ name: String) {
        let continuation: CheckedContinuation<String, Never>? = state.withLock { state in
            guard state.received == nil else { return nil }
            state.received = name
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: name)
    }
}
