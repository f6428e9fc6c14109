import BrokerCore
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

    /// Unix seconds now.
    var seconds: Double { now.timeIntervalSince1970 }

    /// The clock as the broker's parts take it.
    var closure: BrokerClock { { self.seconds } }
}
