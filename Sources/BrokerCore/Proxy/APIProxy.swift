import APIClient
import BrokerCrypto
import Foundation
import WireValues

/// The API proxy (backend for frontend): a request the app sends to `/proxy/{provider}/{path}`
/// with its session token goes to the provider's API with the provider's access token, fresh by
/// the rules of `GET /token` (the refresh skew, one refresh per session at a time). On a 401 from
/// the API the token is refreshed once (joining a refresh under way) and the request sent again
/// when it can be replayed. A token the provider bound to the grant's key (DPoP) goes as
/// `Authorization: DPoP` with a proof of the key for each request, and a request the API refused
/// for want of its nonce is sent once more with it. Takes and returns domain values;
/// `API/ProxyRoutes.swift` reads the request and writes the answer.
struct APIProxy: Sendable {
    let sessions: SessionOperations
    let settings: ProxySettings
    /// The proofs of bound tokens, and the nonces APIs gave.
    let proofs: ProviderProofs

    /// A request to forward, already checked: its target URL and the client headers that pass.
    struct Forward: Sendable {
        let method: String
        let url: String
        let headers: [(String, String)]
        let body: [UInt8]?
    }

    /// Chooses, once the API's head has come, whether its body streams to the client, and into
    /// which sink (never for a 401, which may be retried).
    typealias StreamChoice = @Sendable (_ status: Int, _ contentLength: Int64?) -> (any APIBodySink)?

    /// Sends `request` for `session` to `api`, on `transfers`: the answer whole, or its
    /// head with the body streaming into the sink `stream` chose. Connections to the API are
    /// shared by the provider's sessions, or kept per session (`api_connections: per_session`).
    func forward(_ request: Forward, session: Session, api: ProxiedAPI, on transfers: some APITransport,
                 stream: @escaping StreamChoice) async throws(ProxyFailure) -> APIAnswer {
        let fresh: Session
        do throws(RefreshFailure) {
            fresh = try await sessions.fresh(session, validFor: sessions.refreshSkew)
        } catch {
            throw .refresh(error)
        }
        let token = fresh.accessToken, key = fresh.providerProofKey
        let exchange = try exchange(request, token: token, key: key, session: session.id, api: api)
        let answer: APIAnswer
        switch await transfers.perform(exchange, stream: Self.never401(stream)) {
        case .success(let response): answer = learnt(response, from: request.url, bound: key != nil)
        case .failure(let error): throw .exchange(error)
        }
        return try await retried(request, after: answer, token: token, key: key, session: session.id, api: api, on: transfers,
                                 stream: stream)
    }

    /// `forward` for a caller on a server thread, who gets the answer in `completion`: with the
    /// session's token fresh in hand (the common case) the transfer starts at once, and its
    /// answer goes to `completion` on the proxy's loop thread — no task in between. A token to
    /// refresh first, or a 401 to retry after a refresh, continues in a task, which passes
    /// `trace` on to the provider's calls. The completion holds the session's id, not the session.
    func start(_ request: Forward, session: Session, api: ProxiedAPI, on transfers: some APITransport, trace: TraceContext?,
               stream: @escaping StreamChoice, completion: @escaping @Sendable (Result<APIAnswer, ProxyFailure>) -> Void) {
        guard let fresh = sessions.freshNow(session, validFor: sessions.refreshSkew) else {
            TraceContext.$current.withValue(trace) {
                Task {
                    do throws(ProxyFailure) {
                        completion(.success(try await forward(request, session: session, api: api, on: transfers, stream: stream)))
                    } catch {
                        completion(.failure(error))
                    }
                }
            }
            return
        }
        let token = fresh.accessToken, key = fresh.providerProofKey, sessionID = session.id
        let exchange: APIRequest
        do throws(ProxyFailure) {
            exchange = try self.exchange(request, token: token, key: key, session: sessionID, api: api)
        } catch {
            return completion(.failure(error))
        }
        // The completion runs on the transfers' loop thread: the refresh after a 401 gets the
        // request's trace and id back, for the provider's call.
        transfers.start(exchange, stream: Self.never401(stream)) { [self] result in
            switch result {
            case .failure(let error):
                completion(.failure(.exchange(error)))
            case .success(.whole(let first)) where first.status == 401:
                _ = learnt(.whole(first), from: request.url, bound: key != nil)
                TraceContext.$current.withValue(trace) {
                    retry(request, after: .whole(first), token: token, key: key, session: sessionID, api: api,
                          on: transfers, stream: stream, completion: completion)
                }
            case .success(let answer):
                completion(.success(learnt(answer, from: request.url, bound: key != nil)))
            }
        }
    }

    /// The retry after an API's 401 (``retried(_:after:token:key:session:api:on:stream:)``), in a
    /// task of its own.
    private func retry(_ request: Forward, after answer: APIAnswer, token: String, key: ProofSigningKey?, session: SHA256Digest,
                       api: ProxiedAPI, on transfers: some APITransport, stream: @escaping StreamChoice,
                       completion: @escaping @Sendable (Result<APIAnswer, ProxyFailure>) -> Void) {
        Task {
            do throws(ProxyFailure) {
                completion(.success(try await retried(request, after: answer, token: token, key: key, session: session, api: api,
                                                      on: transfers, stream: stream)))
            } catch {
                completion(.failure(error))
            }
        }
    }

    /// `answer`, once the nonce it carries (`DPoP-Nonce`, on any answer) is kept for the API's
    /// next proofs, when the token is bound.
    private func learnt(_ answer: APIAnswer, from url: String, bound: Bool) -> APIAnswer {
        guard bound else { return answer }
        let headers = switch answer {
        case .whole(let response): response.headers
        case .streaming(_, let headers): headers
        }
        proofs.learn(headers.last { $0.name.lowercased() == "dpop-nonce" }?.value, from: url, resource: true)
        return answer
    }

    /// A 401 is held whole (never streamed): it may be retried.
    private static func never401(_ stream: @escaping StreamChoice) -> StreamChoice {
        { status, length in status == 401 ? nil : stream(status, length) }
    }

    /// `answer` as it is, unless the API refused the token (401): then, when it asked for a DPoP
    /// nonce (``learnt(_:from:bound:)`` kept it), the request once more with it; else (or refused
    /// again) one refresh, joining any under way, and the request sent once more — each only when
    /// its body was kept to replay. A request refused for a nonce that cannot be replayed is
    /// answered "send it again": the next one carries the nonce.
    private func retried(_ request: Forward, after answer: APIAnswer, token: String, key: ProofSigningKey?, session: SHA256Digest,
                         api: ProxiedAPI, on transfers: some APITransport, stream: @escaping StreamChoice) async throws(ProxyFailure) -> APIAnswer {
        guard case .whole(var first) = answer, first.status == 401 else { return answer }
        let replayable = request.body.map { $0.count <= settings.retryMaxBodyBytes } ?? true
        if let key, ProviderProofs.asksForNonce(status: first.status, body: first.body, authenticate: first.header("WWW-Authenticate")),
           first.header("DPoP-Nonce") != nil {
            guard replayable else { throw .nonceNotRetried }
            let again: APIAnswer
            switch await transfers.perform(try exchange(request, token: token, key: key, session: session, api: api),
                                           stream: Self.never401(stream)) {
            case .success(let response): again = learnt(response, from: request.url, bound: true)
            case .failure(let error): throw .exchange(error)
            }
            guard case .whole(let refused) = again, refused.status == 401 else { return again }
            first = refused
        }
        let renewed: Session
        do throws(RefreshFailure) {
            renewed = try await sessions.replacing(token, in: session)
        } catch .tooSoon {
            // Refreshed moments ago, and the API refuses that token too: its answer as it is.
            return .whole(first)
        } catch {
            throw .refresh(error)
        }
        guard replayable else { throw .refreshedNotRetried }
        switch await transfers.perform(try exchange(request, token: renewed.accessToken, key: renewed.providerProofKey, session: session,
                                                    api: api), stream: stream) {
        case .success(let response): return response
        case .failure(let error): throw .exchange(error)
        }
    }

    /// The exchange with the API: the request with the token (with a proof of `key` when the
    /// token is bound to it), on the API's pool of connections, or on the session's own
    /// (`api_connections: per_session`), verified against the provider's authorities.
    private func exchange(_ request: Forward, token: String, key: ProofSigningKey?, session: SHA256Digest, api: ProxiedAPI)
        throws(ProxyFailure) -> APIRequest {
        // A token is a header value here: one with a line break would add headers of its own.
        guard ProxyHeaders.isPlainValue(token) else { throw .exchange(.failed("the provider's access token is not a plain header value")) }
        var headers: [(String, String)] = []
        headers.reserveCapacity(request.headers.count + 4)
        headers += request.headers
        if let key {
            headers.append(("Authorization", "DPoP \(token)"))
            do {
                headers.append(("DPoP", try proofs.proof(key, method: request.method, url: request.url, accessToken: token)))
            } catch {
                throw .exchange(.failed("the broker could not sign its DPoP proof"))
            }
        } else {
            headers.append(("Authorization", "Bearer \(token)"))
        }
        // libcurl would add these itself: a form content type for a body without one, and
        // `Expect: 100-continue` for larger bodies.
        if request.body != nil, !headers.contains(where: { $0.0.lowercased() == "content-type" }) { headers.append(("Content-Type", "")) }
        headers.append(("Expect", ""))
        return APIRequest(
            method: request.method, url: request.url, headers: headers, body: request.body,
            timeoutSeconds: settings.timeoutSeconds, maxResponseBytes: settings.maxResponseBytes,
            allowPrivateAddresses: api.allowPrivateAddresses, allowHTTP: api.allowHTTP,
            connectionKey: api.sharedPool ?? session.hex, authorities: api.authorities
        )
    }
}

/// The proxy's bounds, from `server.limits` and the upstream timeout.
struct ProxySettings: Sendable {
    let timeoutSeconds: Double
    let maxResponseBytes: Int
    /// A body at most this long is kept to be sent again after a refresh; a longer one is not
    /// replayed.
    let retryMaxBodyBytes: Int
    /// What each provider's API connections are verified against.
    let trust: ProviderTrust
}

/// Why a proxied request got no answer from the API.
enum ProxyFailure: Error, Sendable {
    /// The token could not be refreshed (`loginRequired` ends the session as usual).
    case refresh(RefreshFailure)
    /// The API refused the token, which was then refreshed; the request was not replayed.
    case refreshedNotRetried
    /// The API asked for a DPoP nonce, which the broker has now; the request was not replayed.
    case nonceNotRetried
    case exchange(APIExchangeError)
}
