/// The broker's DPoP nonces (RFC 9449 §8, §9), for the apps that ask for them (`dpop_nonce:
/// true`): a proof must then carry a nonce the broker gave out lately, so that a proof made
/// ahead of time by someone holding the key for a while is worthless once its nonce is stale.
/// A nonce is the tag of a five-minute slot under a key derived from the state keys
/// (``BrowserBinding``): every instance sharing them gives out and accepts the same nonces, and
/// none keeps any. One is accepted during its slot and the next.
struct DPoPNonces: Sendable {
    let binding: BrowserBinding
    /// How long one nonce is given out.
    static let slotSeconds = 300.0

    /// The nonce given out at `now`.
    func current(at now: Double) -> String {
        binding.tag("dpop-nonce", String(Self.slot(now)))
    }

    /// Whether `nonce` was given out in this slot or the one before.
    func accepts(_ nonce: String?, at now: Double) -> Bool {
        guard let nonce else { return false }
        let slot = Self.slot(now)
        return binding.accepts(nonce, "dpop-nonce", String(slot)) || binding.accepts(nonce, "dpop-nonce", String(slot - 1))
    }

    private static func slot(_ now: Double) -> Int {
        Int((now / slotSeconds).rounded(.down))
    }
}
