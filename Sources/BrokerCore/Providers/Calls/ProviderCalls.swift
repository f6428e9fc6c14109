import BrokerCrypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import WireValues

/// The broker's calls to a provider: pushed authorization requests, code exchange, refresh,
/// revocation and userinfo, each authenticated as the provider's client where the protocol asks
/// for it.
struct ProviderCalls: Sendable {
    let client: any UpstreamTransport
    let metrics: BrokerMetrics
    /// Dates client assertions.
    let now: BrokerClock
    /// The DPoP proofs of calls for a grant bound to a key, and the nonces providers gave.
    let proofs: ProviderProofs

    init(client: any UpstreamTransport, metrics: BrokerMetrics, now: @escaping BrokerClock, proofs: ProviderProofs? = nil) {
        self.client = client
        self.metrics = metrics
        self.now = now
        self.proofs = proofs ?? ProviderProofs(now: now)
    }

    /// Pushes an authorization request (RFC 9126 §2.1): the provider keeps `parameters` and
    /// answers the `request_uri` that stands for them. With `key`, a DPoP proof binds the code to
    /// come to it (RFC 9449 §10.1).
    func pushAuthorization(_ parameters: [(String, String)], to endpoint: URL, provider: Provider, key: ProofSigningKey? = nil)
        async throws(ProviderCallError) -> String {
        let response = try await sendPost(endpoint, provider: provider, fields: parameters, key: key, endpoint: "par")
        return try PushedAuthorizationResponse.parse(response.body, status: response.status).requestURI
    }

    /// Exchanges an authorization code (RFC 6749 §4.1.3), proving the PKCE verifier (RFC 7636),
    /// and with `key` a DPoP proof (RFC 9449 §5).
    func exchange(code: String, verifier: String, callbackURL: String, provider: Provider, key: ProofSigningKey? = nil)
        async throws(ProviderCallError) -> TokenResponse {
        try await tokenRequest(provider, endpoint: "token", key: key, [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", callbackURL),
            ("code_verifier", verifier),
        ])
    }

    /// Refreshes (RFC 6749 §6), with `key` a DPoP proof.
    func refresh(_ refreshToken: String, provider: Provider, key: ProofSigningKey? = nil) async throws(ProviderCallError) -> TokenResponse {
        try await tokenRequest(provider, endpoint: "refresh", key: key, [("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
    }

    /// What a provider's revocation endpoint said of a token (RFC 7009 §2.2).
    enum Revoked: Sendable {
        /// Revoked, or never valid: 200.
        case confirmed
        /// The provider does not revoke tokens of this kind (`unsupported_token_type`): asking
        /// again changes nothing.
        case unsupported
        /// Not confirmed: unreachable, an error, or another answer. Worth asking again.
        case failed
    }

    /// Revokes a token (RFC 7009), with `key` a DPoP proof of the grant's key.
    func revoke(_ token: String, hint: String, provider: Provider, key: ProofSigningKey? = nil) async -> Revoked {
        guard let endpoint = provider.revocationEndpoint,
              let response = try? await sendPost(endpoint, provider: provider, fields: [("token", token), ("token_type_hint", hint)],
                                                 key: key, endpoint: "revoke")
        else { return .failed }
        if response.status == 200 { return .confirmed }
        if response.status == 400, case .string("unsupported_token_type")? = (try? JSONValue.parse(response.body))?["error"] { return .unsupported }
        return .failed
    }

    /// The provider's userinfo/profile document, with the token in the `Authorization` header
    /// (never in the query string): `Bearer`, or `DPoP` with a proof of `key` (RFC 9449 §7).
    func userinfo(accessToken: String, endpoint: URL, method: String, provider: String, key: ProofSigningKey? = nil)
        async throws(ProviderCallError) -> JSONValue {
        let response = try await proved(key, endpoint, method: method, accessToken: accessToken, provider: provider, endpoint: "userinfo") {
            () async throws(ProviderCallError) in
            var request = URLRequest(url: endpoint)
            request.httpMethod = method
            request.setValue("\(key == nil ? "Bearer" : "DPoP") \(accessToken)", forHTTPHeaderField: "Authorization")
            request.setValue("application/json", forHTTPHeaderField: "Accept")
            return request
        }
        if response.status == 401 { throw .unauthorized }
        guard response.status == 200 else { throw .badResponse("the profile endpoint answered HTTP \(response.status)") }
        guard let json = try? JSONValue.parse(response.body), case .object = json else {
            throw .badResponse("the profile is not a JSON object")
        }
        return json
    }

    private func tokenRequest(_ provider: Provider, endpoint: String, key: ProofSigningKey?, _ fields: [(String, String)])
        async throws(ProviderCallError) -> TokenResponse {
        let response = try await sendPost(provider.tokenEndpoint, provider: provider, fields: fields, key: key, endpoint: endpoint)
        let answer = try TokenResponse.parse(response.body, contentType: response.contentType, status: response.status)
        if answer.boundToKey, key == nil { throw .unusableTokens("the provider bound its token to a key, and the broker sent none", answer) }
        return answer
    }

    /// An authenticated form POST (``authenticatedPost(_:provider:fields:)``), made again for a
    /// second try: a client assertion is for one call.
    private func sendPost(_ url: URL, provider: Provider, fields: [(String, String)], key: ProofSigningKey?, endpoint: String)
        async throws(ProviderCallError) -> UpstreamResponse {
        try await proved(key, url, method: "POST", accessToken: nil, provider: provider.id, endpoint: endpoint) { () async throws(ProviderCallError) in
            try authenticatedPost(url, provider: provider, fields: fields)
        }
    }

    /// Sends the request `make` makes; with `key`, with a DPoP proof for it, and once more with
    /// the nonce the provider gave when it refused the first for want of one (RFC 9449 §8, §9) —
    /// whether or not another call learnt that nonce meanwhile.
    private func proved(_ key: ProofSigningKey?, _ url: URL, method: String, accessToken: String?, provider: String, endpoint: String,
                        _ make: () async throws(ProviderCallError) -> URLRequest) async throws(ProviderCallError) -> UpstreamResponse {
        guard let key else { return try await send(try await make(), provider: provider, endpoint: endpoint) }
        let target = url.absoluteString
        var tries = 0
        while true {
            tries += 1
            var request = try await make()
            do {
                request.setValue(try proofs.proof(key, method: method, url: target, accessToken: accessToken), forHTTPHeaderField: "DPoP")
            } catch {
                throw .proof("\(error)")
            }
            let response = try await send(request, provider: provider, endpoint: endpoint)
            let given = proofs.learn(response.header("DPoP-Nonce"), from: target, resource: accessToken != nil)
            guard tries == 1, given,
                  ProviderProofs.asksForNonce(status: response.status, body: response.body, authenticate: response.header("WWW-Authenticate"))
            else { return response }
        }
    }

    private func send(_ request: URLRequest, provider: String, endpoint: String) async throws(ProviderCallError) -> UpstreamResponse {
        do {
            return try await timed(provider, endpoint) { () async throws(UpstreamError) in try await client.send(request) }
        } catch {
            throw .unavailable(error)
        }
    }

    private func timed(_ provider: String, _ endpoint: String, _ call: () async throws(UpstreamError) -> UpstreamResponse)
        async throws(UpstreamError) -> UpstreamResponse {
        let started = ContinuousClock.now
        defer { metrics.upstreamCall(provider: provider, endpoint: endpoint, seconds: (ContinuousClock.now - started).seconds) }
        do throws(UpstreamError) {
            let response = try await call()
            metrics.upstreamRequest(provider: provider, endpoint: endpoint, outcome: "\(response.status / 100)xx")
            return response
        } catch {
            metrics.upstreamRequest(provider: provider, endpoint: endpoint, outcome: error.outcome)
            throw error
        }
    }

    /// A form POST to `url` with client authentication: HTTP Basic with the form-encoded id and
    /// secret, both in the body (RFC 6749 §2.3.1), or a client assertion signed for this call
    /// (RFC 7523 §2.2; `aud` as ``ClientAssertionAudience`` says).
    private func authenticatedPost(_ url: URL, provider: Provider, fields: [(String, String)]) throws(ProviderCallError) -> URLRequest {
        let config = provider.config
        var fields = fields
        // A pushed authorization request carries client_id already (RFC 9126 §2.1); never twice.
        let namesClient = fields.contains { $0.0 == "client_id" }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        switch config.clientAuthentication {
        case .clientSecretBasic(let secret):
            let credentials = FormFields.escape(config.clientID) + ":" + FormFields.escape(secret.reveal())
            request.setValue("Basic " + Data(credentials.utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        case .clientSecretPost(let secret):
            if !namesClient { fields.append(("client_id", config.clientID)) }
            fields.append(("client_secret", secret.reveal()))
        case .privateKeyJWT(let signer):
            // Explicit endpoints have no issuer; the configuration gives them the endpoint audience.
            let audience = signer.audience == .issuer ? provider.issuer ?? url.absoluteString : url.absoluteString
            let assertion: String
            do {
                assertion = try signer.assertion(clientID: config.clientID, audience: audience, now: now())
            } catch {
                throw .clientAssertion("\(error)")
            }
            if !namesClient { fields.append(("client_id", config.clientID)) }
            fields += [("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"), ("client_assertion", assertion)]
        }
        request.httpBody = Data(FormFields.encode(fields).utf8)
        return request
    }
}
