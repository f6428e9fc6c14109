import BrokerCrypto
import Foundation
import HTTPServer
import Logging
import WireValues

/// `POST /introspect` (RFC 7662, docs/introspection.md): a backend that an app called with its
/// session token asks whether the token is active and whose it is, the way API gateways and
/// resource-server libraries ask. Only the `resource_servers` of the configuration may ask, each
/// with its secret (HTTP Basic, or `client_id` and `client_secret` in the form) or a client
/// assertion signed by one of its keys (`private_key_jwt`, ``ClientAssertionCheck``), and within
/// its `requests_per_minute`. The answer never holds a provider token: who the user is (`sub`, the
/// `provider`), for which app (`client_id`), with which scopes, since when and until when. An
/// unknown, expired or revoked token is `{"active": false}` and nothing more; a revocation on
/// any instance reaches this answer as it reaches `GET /token`.
///
/// A class: a request's closures capture it, one reference rather than a retain per field.
final class IntrospectionRoute: Sendable {
    let config: BrokerConfig
    let callers: Callers
    let metrics: BrokerMetrics
    let logger: Logger
    /// Each resource server's secret, hashed (compared in constant time, length included).
    private let secrets: [String: [UInt8]]
    /// Each `private_key_jwt` resource server's keys.
    private let keys: [String: [ResourceServerKey]]
    /// What a client assertion's `aud` may name: the introspection endpoint, or the broker.
    private let audiences: Set<String>
    /// The client assertions accepted lately (each is good once).
    private let assertions: ReplayMemory
    /// Each resource server's own limit.
    private let limiters: [String: RateLimiter]

    init(config: BrokerConfig, callers: Callers, metrics: BrokerMetrics, logger: Logger) {
        self.config = config
        self.callers = callers
        self.metrics = metrics
        self.logger = logger
        let servers = config.resourceServers
        secrets = Dictionary(uniqueKeysWithValues: servers.compactMap { server in
            guard case .secret(let secret) = server.credential else { return nil }
            return (server.id, SHA256.hash(Array(secret.reveal().utf8)).bytes)
        })
        keys = Dictionary(uniqueKeysWithValues: servers.compactMap { server in
            guard case .keys(let keys, _) = server.credential else { return nil }
            return (server.id, keys)
        })
        var base = config.server.publicURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        audiences = [base + "/introspect", base]
        assertions = ReplayMemory(now: callers.now(), span: ClientAssertionCheck.maximumLifetime + 2 * ClientAssertionCheck.clockSkew)
        limiters = Dictionary(uniqueKeysWithValues: servers.map { ($0.id, RateLimiter(perMinute: $0.requestsPerMinute, key: { $0 }, counted: "of this resource server")) })
    }

    /// Registered whether or not resource servers are configured: without any, nobody can
    /// authenticate, and every call is a 401 that says so.
    func register(in routes: inout RouteTable) {
        routes.add("POST", "/introspect", RoutePolicy(
            caller: .resourceServer, limit: .inHandler("each resource server's requests_per_minute, once it is known"), body: .form
        )) { [self] request throws(HTTPError) in
            try introspect(request)
        }
    }

    private func introspect(_ request: Request) throws(HTTPError) -> Reply {
        let form = try request.form()
        let (server, assertion) = try authenticate(request, form)
        try admit(server)
        let token = try form.required("token")
        let route = request.route
        if let assertion {
            guard assertions.firstHere(assertion.replayID, now: callers.now()) else { throw refused(route: route, "the assertion was used before") }
        }
        // Only session tokens are the broker's to describe; a hint does not change where it looks.
        let id = token.hasPrefix(OpaqueToken.sessionPrefix) ? OpaqueToken.hash(token) : nil
        let shared = !callers.store.holdsEverySession
        if !(shared && assertion != nil) {
            guard let id else { return .now(answer(nil)) }
            if let session = callers.store.session(id, now: callers.now()) {
                callers.store.noteUse(id, now: callers.now()) // a resource server was handed it
                return .now(answer(session))
            }
            guard shared else { return .now(answer(nil)) }
        }
        return .deferredCatching { [self] () async throws(HTTPError) -> Response in
            // With a shared store, an assertion is good once on every instance.
            if let assertion, shared {
                let first: Bool
                do throws(StateWriteError) {
                    first = try await ReplayMemory.firstAnywhere(assertion.replayID, until: assertion.rememberUntil, in: callers.store)
                } catch {
                    throw error.httpError
                }
                guard first else { throw refused(route: route, "the assertion was used before") }
            }
            guard let id else { return answer(nil) }
            let session = try await callers.load(id)
            if session != nil { callers.store.noteUse(id, now: callers.now()) }
            return answer(session)
        }
    }

    /// The resource server that sent `request`, or a 401 (`invalid_client`, with the Basic
    /// challenge): its id and secret by HTTP Basic (RFC 6749 §2.3.1's encoding) or in the form,
    /// or a client assertion (RFC 7523 §2.2), which the caller must still spend once. One of
    /// them only (RFC 6749 §2.3): with two, which one names the caller would depend on who reads
    /// the request.
    private func authenticate(_ request: Request, _ form: FormFields) throws(HTTPError) -> (String, ClientAssertionCheck?) {
        let route = request.route
        let basic = request.header("Authorization").map { $0.prefix(6).lowercased() == "basic " } ?? false
        let asserted = form["client_assertion_type"] != nil || form["client_assertion"] != nil
        guard [basic, asserted, form["client_secret"] != nil].filter({ $0 }).count <= 1 else {
            throw refused(route: route, "more than one client authentication method (RFC 6749 §2.3)")
        }
        if asserted {
            guard form["client_assertion_type"] == ClientAssertionCheck.assertionType, let assertion = form["client_assertion"] else {
                throw refused(route: route, "client_assertion_type must be \(ClientAssertionCheck.assertionType), with client_assertion")
            }
            do throws(ClientAssertionCheck.Refusal) {
                let checked = try ClientAssertionCheck(assertion, keys: { keys[$0] }, audiences: audiences, now: callers.now())
                if let named = form["client_id"], named != checked.client { throw ClientAssertionCheck.Refusal(reason: "client_id is not its iss") }
                return (checked.client, checked)
            } catch {
                throw refused(route: route, error.reason)
            }
        }
        var credentials: (id: String, secret: String)?
        if let header = request.header("Authorization"), header.prefix(6).lowercased() == "basic " {
            if let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
               let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":"),
               let id = try? FormFields.unescape(String(text[..<colon])),
               let secret = try? FormFields.unescape(String(text[text.index(after: colon)...])) {
                credentials = (id, secret)
            }
            if let named = form["client_id"], named != credentials?.id { throw refused(route: route, "client_id is not the Authorization header's client") }
        } else if let id = form["client_id"], let secret = form["client_secret"] {
            credentials = (id, secret)
        }
        guard let credentials, let expected = secrets[credentials.id],
              constantTimeEquals(SHA256.hash(Array(credentials.secret.utf8)).bytes, expected) else {
            throw refused(route: route, nil)
        }
        return (credentials.id, nil)
    }

    /// The 401 for a caller that is no configured resource server, counted; an assertion's
    /// `reason` is logged (it says nothing a holder of the key would not know), never a secret.
    private func refused(route: String, _ reason: String?) -> HTTPError {
        metrics.introspection(outcome: "unauthenticated")
        metrics.rejected(route: route, reason: "resource_server_credential")
        if let reason { logger.notice("introspection refused a client authentication", metadata: ["reason": "\(reason)"]) }
        let description = secrets.isEmpty && keys.isEmpty
            ? "No resource servers are configured (resource_servers): nobody may introspect."
            : "Authenticate as a configured resource server (HTTP Basic, or a client assertion: private_key_jwt)."
        return HTTPError(status: 401, code: "invalid_client", description: description,
                         headers: [HTTPHeader("WWW-Authenticate", #"Basic realm="token-broker""#)])
    }

    /// Takes one of `server`'s requests per minute, or 429.
    private func admit(_ server: String) throws(HTTPError) {
        do throws(HTTPError) {
            try limiters[server]?.admit(server, now: callers.now())
        } catch {
            metrics.introspection(outcome: "rate_limited")
            throw error
        }
    }

    /// RFC 7662 §2.2: `{"active": false}` alone for a token that names no live session.
    private func answer(_ session: Session?) -> Response {
        guard let session else {
            metrics.introspection(outcome: "inactive")
            return .json(.object([("active", .bool(false))]))
        }
        metrics.introspection(outcome: "active")
        return .json(.object([
            ("active", .bool(true)),
            ("sub", .string(session.subject)),
            ("provider", .string(session.provider)),
            ("client_id", .string(session.app)),
            ("scope", .string(session.scopes.joined(separator: " "))),
            ("token_type", .string(session.keyThumbprint == nil ? "Bearer" : "DPoP")),
            ("iss", .string(config.issuer(of: session.provider))),
            ("iat", .int(Int(session.createdAt))),
            ("exp", .int(Int(config.sessions.lifetimes.end(of: session)))),
        ] + (session.keyThumbprint.map { [("cnf", .object([("jkt", .string($0))]))] } ?? [])))
    }
}
