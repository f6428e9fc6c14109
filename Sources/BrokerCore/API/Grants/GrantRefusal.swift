/// Why a grant was not carried out, in the flow's own terms; each token endpoint answers it as
/// RFC 6749 §5.2 says (``GrantRefusal/httpError``).
enum GrantRefusal: Error {
    /// The code, device code or refresh token does not do: unknown, expired, used, another
    /// client's or another issuer's.
    case invalidGrant(String)
    /// A scope the grant does not have.
    case invalidScope(String)
    /// The request's DPoP proof does not fit the grant: missing where the app binds its sessions
    /// to keys or the grant is bound, of another key than the grant's, or sent for an unbound
    /// grant; `reason` labels the refusal's metric (``DPoPProofError/reason``).
    case invalidProof(String, reason: String)
    /// The app asks for DPoP nonces and the proof has none given out lately: use `nonce`.
    case nonceRequired(nonce: String)
    /// The handoff code's redemption refused (``LoginFlow/redeem(_:)``).
    case handoff(HandoffRefusal)
    /// A device's poll answered with RFC 8628 §3.5's error (``DeviceFlow/poll(deviceCode:app:keyThumbprint:)``).
    case device(DevicePollRefusal)
    /// The session's token could not be made fresh (``SessionOperations/fresh(_:validFor:)``).
    case refresh(RefreshFailure)
    /// The store could not be read.
    case unreadable(StateReadError)
    /// A change could not be saved.
    case unsaved(StateWriteError)
}
