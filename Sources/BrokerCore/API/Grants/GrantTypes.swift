import HTTPServer
import WireValues

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

/// The grant handlers, made once over the broker's services: every token endpoint that offers
/// a grant type uses its one handler.
struct GrantHandlers: Sendable {
    let code: AuthorizationCodeGrant
    let refresh: RefreshTokenGrant
    let device: DeviceCodeGrant

    init(_ services: BrokerServices) {
        let rules = GrantProofRules(callers: services.callers)
        code = AuthorizationCodeGrant(login: services.login, endings: services.endings, rules: rules)
        refresh = RefreshTokenGrant(sessions: services.sessions, rules: rules)
        device = DeviceCodeGrant(devices: services.devices, endings: services.endings, rules: rules)
    }

    /// The standard token endpoint's (`/providers/{provider}/token`): all three.
    var standard: GrantTypes { GrantTypes(offered: [code, refresh, device]) }
    /// The broker's own `POST /token`'s: a handoff code and a device's poll (the session token
    /// is refreshed at `POST /refresh`).
    var brokers: GrantTypes { GrantTypes(offered: [code, device]) }
}
