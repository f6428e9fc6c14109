import HTTPServer
import WireValues

/// One grant type a token endpoint offers (RFC 6749 §4.1.3 and §6, RFC 8628 §3.4). As
/// ory/fosite composes its token endpoint from a handler per grant type, every endpoint that
/// offers a grant uses its one handler: the broker's `POST /token` and the standard
/// `/providers/{provider}/token` read, check and carry out a grant the same way, and differ only
/// in the grants they offer and in how they write the answer. A handler holds the few services
/// it uses; it reads its parameters from the request's form (a 400 for a missing one), and
/// carries the grant out to a session or a refusal in the flow's own terms
/// (``GrantRefusal``), which the endpoint turns into its answer.
protocol GrantType: Sendable {
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

/// The client a token request names, as its endpoint reads it: `app` or `client_id` at the
/// broker's `POST /token`; `client_id` or HTTP Basic at the standard endpoint.
struct TokenClient: Sendable {
    let id: String?
    /// The parameter that names it, for the error when a grant needs it and it is missing.
    let parameter: String

    /// The client, which the grant needs named.
    func required() throws(HTTPError) -> String {
        guard let id else { throw .badRequest("Missing required parameter \(parameter).") }
        return id
    }
}

/// A grant read from a token request, ready to be carried out.
struct RequestedGrant: Sendable {
    let limitedPerAddress: Bool
    let carryOut: @Sendable (_ provider: String?, _ proof: DPoPProof?) async throws(GrantRefusal) -> RedeemedSession
}

/// The grants a token endpoint offers.
struct GrantTypes: Sendable {
    let offered: [any GrantType]

    /// The grant the form's `grant_type` names, its parameters read; `unsupported_grant_type`
    /// for any other, with the ones offered.
    func grant(_ form: FormFields, client: TokenClient) throws(HTTPError) -> RequestedGrant {
        let type = try form.required("grant_type")
        for handler in offered where Swift.type(of: handler).type == type {
            return try Self.read(handler, form, client: client)
        }
        throw .badRequest("grant_type must be one of: \(types.joined(separator: ", ")).", code: "unsupported_grant_type")
    }

    private static func read<Handler: GrantType>(_ handler: Handler, _ form: FormFields, client: TokenClient) throws(HTTPError) -> RequestedGrant {
        let parameters = try Handler.parameters(form, client: client)
        return RequestedGrant(limitedPerAddress: Handler.limitedPerAddress) { provider, proof throws(GrantRefusal) in
            try await handler.grant(parameters, at: provider, proof: proof)
        }
    }

    /// The `grant_type` values offered, in order.
    var types: [String] { offered.map { Swift.type(of: $0).type } }
}

extension RedeemedSession {
    /// This session, granted at the issuer of `provider`: one issued for another issuer's
    /// provider is not handed out, and a session it created is ended (``GrantRefusal/unsaved(_:)``
    /// when that cannot be saved: the session is then left to end by its lifetimes, nobody
    /// holding its token).
    func atIssuer(of provider: String?, endings: GrantEndings, otherwise refusal: String) async throws(GrantRefusal) -> RedeemedSession {
        guard let provider, session.provider != provider else { return self }
        if token != nil {
            do throws(StateWriteError) {
                _ = try await endings.endSession(session.id, .otherIssuer)
            } catch {
                throw .unsaved(error)
            }
        }
        throw .invalidGrant(refusal)
    }
}
