import Synchronization

/// Faults a test injects into the embedded store's journal, to show what the store does when the
/// disk fails at the worst moment. Never set otherwise.
final class StateFileFaults: Sendable {
    private let failedSyncs = Atomic<Int>(0)

    /// The next `count` journal frames reach the disk, and their syncs are reported failed all the
    /// same (as a lost acknowledgement).
    func failSyncs(_ count: Int) {
        failedSyncs.store(count, ordering: .relaxed)
    }

    /// Failures still to come.
    var syncsToFail: Int { failedSyncs.load(ordering: .relaxed) }

    func takeFailedSync() -> Bool {
        var current = failedSyncs.load(ordering: .relaxed)
        while current > 0 {
            let (exchanged, original) = failedSyncs.compareExchange(expected: current, desired: current - 1, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }
}
