import Synchronization

/// The keys of the DPoP proofs checked lately, by the header segment that carries them: a client
/// sends the same header (its `typ`, `alg` and `jwk`) with every proof, so the header is read and
/// the key built once, not per request. Bounded: full, it starts again empty.
final class ProofKeys: Sendable {
    private let keys = Mutex<[String: ProofKey]>([:])
    /// More keys than proofs of distinct clients arrive within a minute at one instance.
    static let capacity = 4096

    /// The key of the proof header `segment` (``DPoPProof/key(ofHeader:)``).
    func key(ofHeader segment: Substring) throws(DPoPProofError) -> ProofKey {
        let header = String(segment)
        if let known = keys.withLock({ $0[header] }) { return known }
        let key = try DPoPProof.key(ofHeader: segment)
        keys.withLock { keys in
            if keys.count >= Self.capacity { keys.removeAll(keepingCapacity: true) }
            keys[header] = key
        }
        return key
    }
}
