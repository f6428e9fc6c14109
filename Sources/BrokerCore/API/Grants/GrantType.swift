import HTTPServer
import WireValues

/// One grant type a token endpoint offers (RFC 6749 §4.1.3 and §6, RFC 8628 §3.4). As
/// ory/fosite composes its token endpoint from a handler per grant type, every endpoint that
/// offers a grant uses its one handler: the broker's `POST /token` and the standard
/// `/providers/{provider}/token` read, check and carry out a grant the same way, and differ only
/// in the grants they offer and in how they write the answer (``GrantHandlers``). A handler is an
/// object holding the few services it uses; it reads its parameters from the request's form (a
/// 400 for a missing one), and carries the grant out to a session or a refusal in the flow's own
/// terms (``GrantRefusal``), which the endpoint turns into its answer.
protocol GrantType: AnyObject, Sendable {
    /// A grant's parameters, as read from a token request.
    associatedtype Parameters: Sendable
    /// The `grant_type` value.
    static var type: String { get }
    /// Whether the grant is under the token endpoints' per-address limit (``GrantLimit``). A
    /// refresh is not: a client refreshes when its token is due, and is never refused for it
    /// per address.
    static var limitedPerAddress: Bool { get }
    /// The grant's parameters from the token request's form, for the client it names.
    static func parameters(_ form: FormFields, client: TokenClient) throws(HTTPError) -> Parameters
    /// Carries the grant out at the issuer of `provider` (nil at the broker's own endpoint,
    /// which serves every provider), for a request that proved it holds the key of `proof`
    /// (DPoP, checked and new to every instance) or none: the session and the token its client
    /// is to hold.
    func grant(_ parameters: Parameters, at provider: String?, proof: DPoPProof?) async throws(GrantRefusal) -> RedeemedSession
}

/// A grant read from a token request, ready to be carried out.
struct RequestedGrant: Sendable {
    let limitedPerAddress: Bool
    let carryOut: @Sendable (_ provider: String?, _ proof: DPoPProof?) async throws(GrantRefusal) -> RedeemedSession
}
