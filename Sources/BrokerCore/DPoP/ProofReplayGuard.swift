import BrokerCrypto
import Synchronization

/// Remembers the DPoP proofs accepted within their window, so that none is accepted twice
/// (RFC 9449 §11.1). In memory first, in two generations each as long as a proof's window: a
/// replay to this instance is refused without leaving the server thread. With a store several
/// instances share, a proof new here is then recorded there as well (``StateStore/spendOnce(_:until:)``),
/// so that a replay to another instance is refused too; the embedded store serves one instance,
/// whose memory is all there is to ask (a restart forgets the last minute's proofs: docs/dpop.md).
final class ProofReplayGuard: Sendable {
    private struct Generations {
        var current: Set<SHA256Digest> = []
        var previous: Set<SHA256Digest> = []
        var began: Double
    }

    private let generations: Mutex<Generations>
    /// How long one generation lasts: a proof's whole window.
    private static let span = DPoPProof.acceptedAge + DPoPProof.clockSkew

    init(now: Double) {
        generations = Mutex(Generations(began: now))
    }

    /// Whether `proof` is new to this instance, remembering it if so.
    func firstHere(_ proof: DPoPProof, now: Double) -> Bool {
        generations.withLock { remembered in
            if now - remembered.began >= Self.span {
                // A proof seen before the previous generation began is outside its window now.
                remembered.previous = now - remembered.began >= 2 * Self.span ? [] : remembered.current
                remembered.current = []
                remembered.began = now
            }
            guard !remembered.previous.contains(proof.replayID) else { return false }
            return remembered.current.insert(proof.replayID).inserted
        }
    }

    /// Whether `proof` is new to every instance sharing `store`, recording it there.
    static func firstAnywhere(_ proof: DPoPProof, in store: any StateStore) async throws(StateWriteError) -> Bool {
        try await store.spendOnce(proof.replayID, until: proof.rememberUntil)
    }
}
