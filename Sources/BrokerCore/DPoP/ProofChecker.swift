import BrokerCrypto
import Foundation

/// Checks the DPoP proofs of requests to this broker (``DPoPProof``), remembers those it
/// accepted (``ReplayMemory``) and gives out its nonces (``DPoPNonces``): one per broker,
/// shared by every route.
final class ProofChecker: Sendable {
    /// The broker's public URL, the base of every `htu`.
    let base: ProofURL
    let keys = ProofKeys()
    let replay: ReplayMemory
    let nonces: DPoPNonces

    init(publicURL: URL, binding: BrowserBinding, now: Double) {
        var text = publicURL.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        base = ProofURL(text)
        replay = ReplayMemory(now: now, span: DPoPProof.acceptedAge + DPoPProof.clockSkew)
        nonces = DPoPNonces(binding: binding)
    }

    /// `text` checked as the proof of a request with `method` to `path`, presenting the token
    /// whose hash is `tokenHash` (nil at a token endpoint).
    func check(_ text: String, method: String, path: Substring, tokenHash: SHA256Digest?, now: Double) throws(DPoPProofError) -> DPoPProof {
        try DPoPProof(text, method: method, url: ProofURL(base: base, path: path), tokenHash: tokenHash, now: now, keys: keys)
    }
}
