import APIClient
import BrokerCrypto
import Foundation
import Synchronization
import Testing
import WireValues

@testable import BrokerCore

/// The API proxy's decisions (``APIProxy``), over the flow test bed's sessions and scripted
/// provider, with an API scripted behind the ``APITransport`` seam: which token each request
/// carries, the one refresh-and-retry after a 401, when it does not retry, and what it passes on.
struct APIProxyTests {
    /// An API that answers each request with the next scripted result, and keeps the requests.
    final class ScriptedAPI: APITransport, Sendable {
        private let state = Mutex<(answers: [Result<APIAnswer, APIExchangeError>], requests: [APIRequest], streamedStatuses: [Int: Bool])>(([], [], [:]))

        init(_ answers: [Result<APIAnswer, APIExchangeError>]) {
            state.withLock { $0.answers = answers }
        }

        var requests: [APIRequest] { state.withLock { $0.requests } }
        /// For each status answered, whether the proxy let it stream (asked for a sink).
        var streamed: [Int: Bool] { state.withLock { $0.streamedStatuses } }

        func start(_ request: APIRequest, stream: (@Sendable (Int, Int64?) -> (any APIBodySink)?)?,
                   completion: @escaping @Sendable (Result<APIAnswer, APIExchangeError>) -> Void) {
            let next = state.withLock { state -> Result<APIAnswer, APIExchangeError> in
                state.requests.append(request)
                let answer = state.answers.isEmpty ? .failure(.failed("no answer scripted")) : state.answers.removeFirst()
                if case .success(.whole(let response)) = answer { state.streamedStatuses[response.status] = stream?(response.status, nil) != nil }
                return answer
            }
            completion(next)
        }

        func perform(_ request: APIRequest, stream: (@Sendable (Int, Int64?) -> (any APIBodySink)?)?) async -> Result<APIAnswer, APIExchangeError> {
            await withCheckedContinuation { continuation in start(request, stream: stream) { continuation.resume(returning: $0) } }
        }
    }

    /// A sink that takes everything (only its presence matters here).
    struct Sink: APIBodySink {
        func offer(_ bytes: UnsafeRawBufferPointer, waker: APIBodyWaker) -> APIBodyOffer { .taken }
        func finish(ok: Bool) {}
    }

    static func answer(_ status: Int) -> Result<APIAnswer, APIExchangeError> {
        .success(.whole(APIResponse(status: status, headers: [], body: Array("status \(status)".utf8))))
    }

    static func proxy(_ bed: FlowTestBed, retryMaxBodyBytes: Int = 16) throws -> APIProxy {
        APIProxy(sessions: bed.sessions, settings: ProxySettings(timeoutSeconds: 7, maxResponseBytes: 1234, retryMaxBodyBytes: retryMaxBodyBytes,
                                                                trust: try ProviderTrust([ScriptedProvider.config()])),
                 proofs: bed.sessions.calls.proofs)
    }

    /// The scripted provider's API (or `provider`'s), as the proxy's routes make it.
    static func api(_ provider: ProviderConfig = ScriptedProvider.config()) throws -> ProxiedAPI {
        ProxiedAPI(provider, trust: try ProviderTrust([provider]))
    }

    static let get = APIProxy.Forward(method: "GET", url: "https://api.test/data", headers: [("Accept", "application/json")], body: nil)

    static func status(_ answer: APIAnswer) -> Int? {
        if case .whole(let response) = answer { return response.status }
        return nil
    }

    static func bearer(_ request: APIRequest) -> String? {
        request.headers.first { $0.0 == "Authorization" }.map { String($0.1.dropFirst("Bearer ".count)) }
    }

    @Test(arguments: StoreKind.allCases)
    func aFreshTokenGoesAtOnceWithTheProxysBounds(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            let api = ScriptedAPI([Self.answer(200)])
            let answer = try await Self.proxy(bed).forward(Self.get, session: session, api: try Self.api(), on: api) { _, _ in Sink() }
            #expect(Self.status(answer) == 200)
            let sent = try #require(api.requests.first)
            #expect(Self.bearer(sent) == session.accessToken && bed.provider.refreshes == 0)
            #expect(sent.timeoutSeconds == 7 && sent.maxResponseBytes == 1234 && sent.connectionKey == "api:idp")
            #expect(sent.headers.contains { $0 == ("Accept", "application/json") } && sent.headers.contains { $0 == ("Expect", "") })
            #expect(api.streamed[200] == true, "a 200 may stream")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aTokenAboutToExpireIsRefreshedFirst(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            bed.clock.advance(by: 3600)
            let api = ScriptedAPI([Self.answer(200)])
            _ = try await Self.proxy(bed).forward(Self.get, session: session, api: try Self.api(), on: api) { _, _ in nil }
            let sent = try #require(api.requests.first.flatMap(Self.bearer))
            #expect(sent != session.accessToken && bed.provider.accepts(sent) && bed.provider.refreshes == 1)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func a401IsRefreshedOnceAndSentAgainNeverStreamed(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            let api = ScriptedAPI([Self.answer(401), Self.answer(200)])
            let answer = try await Self.proxy(bed).forward(Self.get, session: session, api: try Self.api(), on: api) { _, _ in Sink() }
            #expect(Self.status(answer) == 200)
            let tokens = api.requests.compactMap(Self.bearer)
            #expect(tokens.count == 2 && tokens[0] == session.accessToken && tokens[1] != tokens[0] && bed.provider.accepts(tokens[1]))
            #expect(bed.provider.refreshes == 1)
            #expect(api.streamed[401] == false, "a 401 is held whole: it may be retried")
        }
    }

    /// The request's DPoP proof claims, checked to be signed by `key`.
    static func proofClaims(_ request: APIRequest, by key: ProofSigningKey) throws -> JSONValue {
        let text = try #require(request.headers.first { $0.0 == "DPoP" }?.1)
        let parts = text.split(separator: ".").map(String.init)
        let verifier = try #require(VerificationKey(.es256, first: Base64URL.decode(key.x)!, second: Base64URL.decode(key.y)!))
        #expect(verifier.isValid(try #require(Base64URL.decode(parts[2])), of: parts[0] + "." + parts[1]))
        return try JSONValue.parse(try #require(Base64URL.decode(parts[1])))
    }

    @Test(arguments: StoreKind.allCases)
    func aBoundTokenGoesWithAProofAndTheAPIsNonceIsLearntWithoutARefresh(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let key = try ProofSigningKey.generate()
            let made = try await bed.newSession().session
            let session = try #require(try await bed.store.updateSession(made.id, under: nil) { $0.providerProofKey = key })
            let challenge = APIResponse(status: 401, headers: [("WWW-Authenticate", #"DPoP error="use_dpop_nonce""#), ("DPoP-Nonce", "api-1")],
                                        body: [])
            let api = ScriptedAPI([.success(.whole(challenge)), Self.answer(200)])
            let get = APIProxy.Forward(method: "GET", url: "https://api.test/data?page=2", headers: [], body: nil)
            let answer = try await Self.proxy(bed).forward(get, session: session, api: try Self.api(), on: api) { _, _ in nil }
            #expect(Self.status(answer) == 200 && bed.provider.refreshes == 0, "a nonce challenge is no reason to refresh")
            let sent = api.requests
            try #require(sent.count == 2)
            #expect(sent.allSatisfy { request in request.headers.contains { $0 == ("Authorization", "DPoP \(session.accessToken)") } })
            let first = try Self.proofClaims(sent[0], by: key), second = try Self.proofClaims(sent[1], by: key)
            #expect(first["htu"] == .string("https://api.test/data") && first["htm"] == .string("GET") && first["nonce"] == nil)
            #expect(first["ath"] == .string(SHA256.hash(session.accessToken).withUnsafeBytes { Base64URL.encode($0) }))
            #expect(second["nonce"] == .string("api-1") && second["jti"] != first["jti"])
            // A 401 that asks for no nonce is the token refused: the refresh path, as for bearer tokens.
            let refused = ScriptedAPI([Self.answer(401), Self.answer(200)])
            _ = try await Self.proxy(bed).forward(get, session: session, api: try Self.api(), on: refused) { _, _ in nil }
            #expect(bed.provider.refreshes == 1 && refused.requests.count == 2)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aNonceOnAnyAnswerIsKeptAndAChallengeToABodyNotKeptAsksForItAgainWithoutARefresh(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let key = try ProofSigningKey.generate()
            let made = try await bed.newSession().session
            let session = try #require(try await bed.store.updateSession(made.id, under: nil) { $0.providerProofKey = key })
            let proxy = try Self.proxy(bed, retryMaxBodyBytes: 4), scripted = try Self.api()
            let given = APIResponse(status: 200, headers: [("DPoP-Nonce", "api-7")], body: [])
            let challenge = APIResponse(status: 401, headers: [("WWW-Authenticate", #"DPoP error="use_dpop_nonce""#), ("DPoP-Nonce", "api-8")],
                                        body: [])
            let api = ScriptedAPI([.success(.whole(given)), .success(.whole(challenge)), Self.answer(200)])
            _ = try await proxy.forward(Self.get, session: session, api: scripted, on: api) { _, _ in nil }
            let upload = APIProxy.Forward(method: "POST", url: "https://api.test/data", headers: [], body: Array("too long to keep".utf8))
            do throws(ProxyFailure) {
                _ = try await proxy.forward(upload, session: session, api: scripted, on: api) { _, _ in nil }
                Issue.record("a challenged upload that was not kept was answered")
            } catch {
                guard case .nonceNotRetried = error else { throw error }
            }
            #expect(bed.provider.refreshes == 0, "a nonce challenge is no reason to refresh")
            _ = try await proxy.forward(Self.get, session: session, api: try Self.api(), on: api) { _, _ in nil }
            let nonces = try api.requests.map { try Self.proofClaims($0, by: key)["nonce"] }
            #expect(nonces == [nil, .string("api-7"), .string("api-8")])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func a401AgainAfterTheRefreshIsTheAPIsAnswer(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            let api = ScriptedAPI([Self.answer(401), Self.answer(401)])
            let answer = try await Self.proxy(bed).forward(Self.get, session: session, api: try Self.api(), on: api) { _, _ in nil }
            #expect(Self.status(answer) == 401 && api.requests.count == 2 && bed.provider.refreshes == 1, "one refresh, one retry, no more")
            // Refused again moments later: the refresh bound holds, and the API's 401 is the answer.
            let later = ScriptedAPI([Self.answer(401)])
            let refreshed = try #require(try await bed.stored(session.id))
            let again = try await Self.proxy(bed).forward(Self.get, session: refreshed, api: try Self.api(), on: later) { _, _ in nil }
            #expect(Self.status(again) == 401 && later.requests.count == 1 && bed.provider.refreshes == 1)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aBodyTooLongToKeepIsNotSentAgain(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            let api = ScriptedAPI([Self.answer(401), Self.answer(200)])
            let post = APIProxy.Forward(method: "POST", url: "https://api.test/data", headers: [], body: Array(repeating: 0x61, count: 17))
            await #expect(throws: ProxyFailure.self) {
                try await Self.proxy(bed, retryMaxBodyBytes: 16).forward(post, session: session, api: try Self.api(), on: api) { _, _ in nil }
            }
            #expect(api.requests.count == 1 && bed.provider.refreshes == 1, "refreshed, but the request is not replayed")
            #expect(api.requests[0].headers.contains { $0 == ("Content-Type", "") }, "no form type made up for a body without one")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aFailedRefreshOrExchangeIsTheProxysFailure(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            bed.provider.failNextRefresh(status: 400, body: #"{"error":"invalid_grant"}"#)
            let refused = ScriptedAPI([Self.answer(401)])
            let proxy = try Self.proxy(bed), scripted = try Self.api()
            do throws(ProxyFailure) {
                _ = try await proxy.forward(Self.get, session: session, api: scripted, on: refused) { _, _ in nil }
                Issue.record("answered after the provider refused the grant")
            } catch {
                guard case .refresh(.loginRequired) = error else { Issue.record("\(error)"); return }
            }
            let other = try await bed.newSession(subject: "bob").session
            let down = ScriptedAPI([.failure(.timedOut)])
            do throws(ProxyFailure) {
                _ = try await proxy.forward(Self.get, session: other, api: scripted, on: down) { _, _ in nil }
                Issue.record("answered without an answer")
            } catch {
                guard case .exchange(.timedOut) = error else { Issue.record("\(error)"); return }
            }
        }
    }

    /// `start`, the server thread's way in (the routes use it): the same retry after a 401,
    /// answered through its completion.
    @Test(arguments: StoreKind.allCases)
    func startRetriesA401AsForwardDoes(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let session = try await bed.newSession().session
            let api = ScriptedAPI([Self.answer(401), Self.answer(200)])
            let proxy = try Self.proxy(bed), scripted = try Self.api()
            let result = await withCheckedContinuation { continuation in
                proxy.start(Self.get, session: session, api: scripted, on: api, trace: nil, stream: { _, _ in nil }) {
                    continuation.resume(returning: $0)
                }
            }
            #expect((try? result.get()).flatMap(Self.status) == 200 && api.requests.count == 2 && bed.provider.refreshes == 1)
        }
    }

    @Test func perSessionConnectionsAreKeyedBySession() async throws {
        let bed = try await FlowTestBed(.embedded)
        try await bed.closing {
            let session = try await bed.newSession().session
            let scripted = ScriptedProvider.config()
            let provider = ProviderConfig(id: scripted.id, endpoints: scripted.endpoints, clientID: scripted.clientID,
                                          clientAuthentication: scripted.clientAuthentication, scopes: scripted.scopes, apiConnections: .perSession)
            let api = ScriptedAPI([Self.answer(200)])
            _ = try await Self.proxy(bed).forward(Self.get, session: session, api: try Self.api(provider), on: api) { _, _ in nil }
            #expect(api.requests.first?.connectionKey == session.id.hex)
        }
    }
}
