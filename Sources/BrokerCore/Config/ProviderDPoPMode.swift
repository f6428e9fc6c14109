/// Whether the broker binds a provider's tokens to a key of its own with DPoP (RFC 9449): a key
/// per grant, made at the sign-in, and a proof with every call that carries the grant (`dpop`).
public enum ProviderDPoPMode: String, Sendable, Hashable, CaseIterable {
    /// When the provider's discovery document lists ES256 in `dpop_signing_alg_values_supported`.
    case auto
    /// Always: proofs on every call, and a sign-in whose tokens the provider did not bind fails.
    case required
    /// Never.
    case off
}
