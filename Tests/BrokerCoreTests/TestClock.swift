import Foundation
import Synchronization

/// A clock the test sets by hand.
final class TestClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date) {
        current = Mutex(start)
    }

    var now: Date { current.withLock { $0 } }

    func set(_ date: Date) { current.withLock { $0 = date } }

    func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }

    /// The clock as the verifier and cache take it.
    var closure: @Sendable () -> Date { { self.now } }

    /// Unix seconds, as the state store takes them.
    var seconds: Double { now.timeIntervalSince1970 }
}
