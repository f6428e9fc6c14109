import Synchronization

/// At most `limit` lines a `window` for messages any client can cause, one each: libmicrohttpd's
/// word on each malformed request (a line a request, at `warning`, would let any client fill
/// the log). The first line let through after some were held back says how many.
final class MessageThrottle: Sendable {
    private struct Window {
        var start = -Double.infinity
        var logged = 0
        var held = 0
    }

    private let limit: Int
    private let window: Double
    private let now: @Sendable () -> Double
    private let state = Mutex(Window())

    private static let origin = ContinuousClock.now

    /// `now` in seconds, monotonic (the process's clock by default).
    init(limit: Int = 10, window: Double = 60, now: @escaping @Sendable () -> Double = { (ContinuousClock.now - MessageThrottle.origin).seconds }) {
        self.limit = limit
        self.window = window
        self.now = now
    }

    /// Whether a message may be logged now, and how many were held back since the last one that
    /// was; nil when this one is held back (and counted).
    func admit() -> Int? {
        let at = now()
        return state.withLock { state in
            if at - state.start >= window {
                state.start = at
                state.logged = 0
            }
            guard state.logged < limit else {
                state.held += 1
                return nil
            }
            state.logged += 1
            defer { state.held = 0 }
            return state.held
        }
    }
}
