import BrokerCrypto
import Synchronization

/// Remembers the single-use values accepted within their window — DPoP proofs (RFC 9449 §11.1),
/// client assertions (RFC 7523 §3) — so that none is accepted twice. In memory, in two
/// generations each as long as the longest window: a replay to this instance is refused without
/// leaving the server thread. With a store several instances share, a value new here is then
/// recorded there as well (``firstAnywhere(_:until:in:)``, the store's `spendOnce`), so that a
/// replay to another instance is refused too; the embedded store serves one instance, whose
/// memory is all there is to ask (a restart forgets the last window: docs/dpop.md).
final class ReplayMemory: Sendable {
    private struct Generations {
        var current: Set<SHA256Digest> = []
        var previous: Set<SHA256Digest> = []
        var began: Double
    }

    private let generations: Mutex<Generations>
    /// How long one generation lasts: at least the longest window of a value remembered here.
    private let span: Double

    init(now: Double, span: Double) {
        generations = Mutex(Generations(began: now))
        self.span = span
    }

    /// Whether `id` is new to this instance, remembering it if so.
    func firstHere(_ id: SHA256Digest, now: Double) -> Bool {
        generations.withLock { remembered in
            if now - remembered.began >= span {
                // A value seen before the previous generation began is outside its window now.
                remembered.previous = now - remembered.began >= 2 * span ? [] : remembered.current
                remembered.current = []
                remembered.began = now
            }
            guard !remembered.previous.contains(id) else { return false }
            return remembered.current.insert(id).inserted
        }
    }

    /// Whether `id` is new to every instance sharing `store`, recording it there until `until`.
    static func firstAnywhere(_ id: SHA256Digest, until: Double, in store: any StateStore) async throws(StateWriteError) -> Bool {
        try await store.spendOnce(id, until: until)
    }
}
