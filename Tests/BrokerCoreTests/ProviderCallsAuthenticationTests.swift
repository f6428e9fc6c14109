import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
import WireValues

@testable import BrokerCore

/// How each call that authenticates carries the client's credentials, a pushed authorization
/// request included: the request a provider receives, recorded without a network.
struct ProviderCallsAuthenticationTests {
    /// Records each request and answers a PAR endpoint's 201.
    final class Recorder: UpstreamTransport, Sendable {
        let requests = Mutex<[URLRequest]>([])

        func send(_ request: URLRequest) async throws(UpstreamError) -> UpstreamResponse {
            requests.withLock { $0.append(request) }
            return UpstreamResponse(status: 201, contentType: "application/json",
                                    body: Array(#"{"request_uri":"urn:example:bwc4JK-ESC0w8acc191e-Y1LTC2","expires_in":60}"#.utf8))
        }

        var last: (request: URLRequest, form: FormFields)? {
            guard let request = requests.withLock({ $0.last }) else { return nil }
            return (request, (try? FormFields(parsing: String(decoding: request.httpBody ?? Data(), as: UTF8.self))) ?? FormFields())
        }
    }

    static let issuer = URL(string: "https://idp.example/tenant")!
    static let par = URL(string: "https://idp.example/tenant/par")!

    static func provider(_ authentication: ClientAuthentication) throws -> Provider {
        let body = #"{"issuer":"https://idp.example/tenant","authorization_endpoint":"https://idp.example/tenant/authorize","#
            + #""token_endpoint":"https://idp.example/tenant/token","pushed_authorization_request_endpoint":"https://idp.example/tenant/par","#
            + #""token_endpoint_auth_methods_supported":["private_key_jwt"]}"#
        let document = try DiscoveryCache.parse(Array(body.utf8), expectedIssuer: issuer)
        return Provider(config: ProviderConfig(id: "idp", endpoints: .discovery(issuer: issuer), clientID: "broker-client",
                                               clientAuthentication: authentication), discovered: document)
    }

    static let pushed = [("response_type", "code"), ("client_id", "broker-client"), ("state", "s"), ("scope", "openid")]

    @Test(arguments: [ClientAssertionAudience.issuer, .endpoint])
    func aPushCarriesOneClientIDAndAnAssertionForItsAudience(_ audience: ClientAssertionAudience) async throws {
        let recorder = Recorder()
        let calls = ProviderCalls(client: recorder, metrics: BrokerMetrics(), now: { 1_800_000_000 })
        let key = try ClientAssertionTests.key("ec-pkcs8.pem")
        let signer = try ClientAssertionSigner.make(signingKey: key, algorithm: nil, secondKey: nil, audience: audience).get()
        let requestURI = try await calls.pushAuthorization(Self.pushed, to: Self.par, provider: try Self.provider(.privateKeyJWT(signer)))
        #expect(requestURI == "urn:example:bwc4JK-ESC0w8acc191e-Y1LTC2")
        let (request, form) = try #require(recorder.last)
        #expect(request.url == Self.par && request.value(forHTTPHeaderField: "Authorization") == nil)
        #expect(form.names.filter { $0 == "client_id" }.count == 1 && form["state"] == "s")
        #expect(form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        let claims = try ClientAssertionTests.parts(try #require(form["client_assertion"])).claims
        #expect(claims["aud"]?.stringValue == (audience == .issuer ? Self.issuer.absoluteString : Self.par.absoluteString))
        #expect(claims["iat"] == .int(1_800_000_000) && form["client_secret"] == nil)
    }

    @Test func secretsGoAsTheyAlwaysDidWithOneClientID() async throws {
        let recorder = Recorder()
        let calls = ProviderCalls(client: recorder, metrics: BrokerMetrics(), now: { 1_800_000_000 })
        _ = try await calls.pushAuthorization(Self.pushed, to: Self.par,
                                              provider: try Self.provider(.clientSecretPost(Secret("s3cret", source: "test"))))
        let posted = try #require(recorder.last)
        #expect(posted.form.names.filter { $0 == "client_id" }.count == 1 && posted.form["client_secret"] == "s3cret")
        _ = try await calls.pushAuthorization(Self.pushed, to: Self.par,
                                              provider: try Self.provider(.clientSecretBasic(Secret("s3cret", source: "test"))))
        let basic = try #require(recorder.last)
        #expect(basic.request.value(forHTTPHeaderField: "Authorization") == "Basic " + Data("broker-client:s3cret".utf8).base64EncodedString())
        #expect(basic.form["client_secret"] == nil && basic.form["client_assertion"] == nil)
    }
}
