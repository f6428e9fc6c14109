import Synchronization

/// Faults a test injects into the connections of a pool (``PostgresConnection/Options/faults``),
/// to show what the store does when the network fails at the worst moment. Never set otherwise.
public final class PostgresFaults: Sendable {
    private let lostAcknowledgements = Atomic<Int>(0)

    public init() {}

    /// The next `count` commits reach the server, which commits them, and their answers are lost
    /// on the way back (the connection breaks).
    public func loseCommitAcknowledgements(_ count: Int) {
        lostAcknowledgements.store(count, ordering: .relaxed)
    }

    /// Commits whose acknowledgements are still to be lost.
    public var acknowledgementsToLose: Int { lostAcknowledgements.load(ordering: .relaxed) }

    func takeLostAcknowledgement() -> Bool {
        var current = lostAcknowledgements.load(ordering: .relaxed)
        while current > 0 {
            let (exchanged, original) = lostAcknowledgements.compareExchange(expected: current, desired: current - 1, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }
}
