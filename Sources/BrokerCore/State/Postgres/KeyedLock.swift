import BrokerCrypto
import Synchronization

/// An async lock per session id, within one process: a caller waits (suspended, not blocking a
/// thread) while another holds the same id. The PostgreSQL store serialises its own updates of
/// one session with it, so that its compare-and-set retries only on other instances' changes.
final class KeyedLock: Sendable {
    private let waiting = Mutex<[SHA256Digest: [CheckedContinuation<Void, Never>]]>([:])

    func withLock<T>(_ id: SHA256Digest, _ body: () async throws(StateWriteError) -> T) async throws(StateWriteError) -> T {
        await withCheckedContinuation { continuation in
            let acquired = waiting.withLock { waiting in
                if waiting[id] == nil {
                    waiting[id] = []
                    return true
                }
                waiting[id]?.append(continuation)
                return false
            }
            if acquired { continuation.resume() }
        }
        defer {
            let next = waiting.withLock { waiting -> CheckedContinuation<Void, Never>? in
                guard var queue = waiting[id], !queue.isEmpty else {
                    waiting[id] = nil
                    return nil
                }
                let next = queue.removeFirst()
                waiting[id] = queue
                return next
            }
            next?.resume()
        }
        return try await body()
    }
}
