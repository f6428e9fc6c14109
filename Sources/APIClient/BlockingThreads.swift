import Foundation
import Synchronization

/// Threads for blocking work (a libcurl transfer), kept between jobs: a job goes to an idle
/// thread, or to a new one while fewer than `limit` exist, or waits in line — in a line of at
/// most `queueLimit` jobs: beyond it the job is refused. Creating a thread per call cost more
/// than the call itself on a local API.
final class BlockingThreads: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var threads = 0
        var idle = 0
    }

    private let state = Mutex(State())
    private let wakeup = NSCondition()
    private let limit: Int
    private let queueLimit: Int

    init(limit: Int, queueLimit: Int) {
        self.limit = limit
        self.queueLimit = queueLimit
    }

    /// Runs `job` on one of the threads; false when the line is full (the job will not run).
    func run(_ job: @escaping @Sendable () -> Void) -> Bool {
        let (accepted, spawn) = state.withLock { state -> (Bool, Bool) in
            if state.idle == 0, state.threads >= limit, state.jobs.count >= queueLimit { return (false, false) }
            state.jobs.append(job)
            guard state.idle == 0, state.threads < limit else { return (true, false) }
            state.threads += 1
            return (true, true)
        }
        guard accepted else { return false }
        if spawn {
            let thread = Thread { [self] in work() }
            thread.stackSize = 512 * 1024
            thread.start()
        } else {
            wakeup.lock()
            wakeup.signal()
            wakeup.unlock()
        }
        return true
    }

    private func work() {
        while true {
            wakeup.lock()
            var job = state.withLock { state in state.jobs.isEmpty ? nil : state.jobs.removeFirst() }
            while job == nil {
                state.withLock { $0.idle += 1 }
                wakeup.wait()
                job = state.withLock { state in
                    state.idle -= 1
                    return state.jobs.isEmpty ? nil : state.jobs.removeFirst()
                }
            }
            wakeup.unlock()
            job?()
        }
    }
}
