import HTTPServer
import WireValues

/// One grant type a token endpoint offers (RFC 6749 §4.1.3 and §6, RFC 8628 §3.4). As
/// ory/fosite composes its token endpoint from a handler per grant type, every endpoint that
/// offers a grant uses its one type: the broker's `POST /token` and the standard
/// `/providers/{provider}/token` read, check and carry out a grant the same way, and differ only
/// in the grants they offer and in how they write the answer.
protocol TokenGrant: Sendable {
    /// The `grant_type` value.
    static var type: String { get }
    /// Whether the grant counts against the token endpoints' per-address limit. A refresh does
    /// not: a client refreshes when its token is due, and is never refused for it per address.
    static var limitedPerAddress: Bool { get }
    /// The grant's parameters from the token request's form, for the client it names.
    init(_ form: FormFields, client: TokenClient) throws(HTTPError)
    /// Carries the grant out at the issuer of `provider` (nil at the broker's own endpoint,
    /// which serves every provider): the session and the token its client is to hold.
    func grant(at provider: String?, _ services: BrokerServices) async throws(HTTPError) -> GrantedSession
}

/// What a grant gives: the session, and the token its client holds for it — a new session's
/// token (handed out this once), the presented one for a refresh, nil for a handoff code that
/// completed an incremental authorization of a session the app holds already.
struct GrantedSession: Sendable {
    let session: Session
    let token: String?
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

/// The grants a token endpoint offers.
struct TokenGrants: Sendable {
    let offered: [any TokenGrant.Type]

    /// The grant the form's `grant_type` names, its parameters read; `unsupported_grant_type`
    /// for any other, with the ones offered.
    func grant(_ form: FormFields, client: TokenClient) throws(HTTPError) -> any TokenGrant {
        let type = try form.required("grant_type")
        for grant in offered where grant.type == type {
            return try grant.init(form, client: client)
        }
        throw .badRequest("grant_type must be one of: \(types.joined(separator: ", ")).", code: "unsupported_grant_type")
    }

    /// The `grant_type` values offered, in order.
    var types: [String] { offered.map { $0.type } }
}

extension BrokerServices {
    /// A granted session at the issuer of `provider`: one issued for another issuer's provider
    /// is not handed out, and a session it created is ended.
    func granted(_ granted: GrantedSession, at provider: String?, refusal: String) async throws(HTTPError) -> GrantedSession {
        guard let provider, granted.session.provider != provider else { return granted }
        if granted.token != nil { _ = try? await sessions.revoke(granted.session.id) }
        throw .badRequest(refusal, code: "invalid_grant")
    }
}
