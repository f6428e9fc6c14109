import BrokerCrypto
import Foundation
import HTTPServer
import WireValues

/// `POST /introspect` (RFC 7662, docs/introspection.md): a backend that an app called with its
/// session token asks whether the token is active and whose it is, the way API gateways and
/// resource-server libraries ask. Only the `resource_servers` of the configuration may ask, each
/// with its secret (HTTP Basic, or `client_id` and `client_secret` in the form) and within its
/// `requests_per_minute`. The answer never holds a provider token: who the user is (`sub`, the
/// `provider`), for which app (`client_id`), with which scopes, since when and until when. An
/// unknown, expired or revoked token is `{"active": false}` and nothing more; a revocation on
/// any instance reaches this answer as it reaches `GET /token`.
struct IntrospectionRoute: Sendable {
    let services: BrokerServices
    /// Each resource server's secret, hashed (compared in constant time, length included).
    private let secrets: [String: [UInt8]]
    /// Each resource server's own limit.
    private let limiters: [String: RateLimiter]

    init(services: BrokerServices) {
        self.services = services
        let servers = services.config.resourceServers
        secrets = Dictionary(uniqueKeysWithValues: servers.map { ($0.id, SHA256.hash(Array($0.secret.reveal().utf8)).bytes) })
        limiters = Dictionary(uniqueKeysWithValues: servers.map { ($0.id, RateLimiter(perMinute: $0.requestsPerMinute) { $0 }) })
    }

    /// Registered whether or not resource servers are configured: without any, nobody can
    /// authenticate, and every call is a 401 that says so.
    func register(in router: inout Router) {
        router.add("POST", "/introspect") { [self] request throws(HTTPError) in try introspect(request) }
    }

    private func introspect(_ request: Request) throws(HTTPError) -> Reply {
        let form = try request.form()
        let server = try authenticate(request, form)
        try admit(server)
        let token = try form.required("token")
        // Only session tokens are the broker's to describe; a hint does not change where it looks.
        guard token.hasPrefix(OpaqueToken.sessionPrefix) else { return .now(answer(nil)) }
        let id = OpaqueToken.hash(token)
        if let session = services.store.session(id, now: services.now()) { return .now(answer(session)) }
        guard !services.store.holdsEverySession else { return .now(answer(nil)) }
        return .deferredCatching { [self] () async throws(HTTPError) -> Response in
            answer(try await services.load(id))
        }
    }

    /// The resource server that sent `request`, or a 401 (`invalid_client`, with the Basic
    /// challenge): its id and secret by HTTP Basic (RFC 6749 §2.3.1's encoding) or in the form.
    private func authenticate(_ request: Request, _ form: FormFields) throws(HTTPError) -> String {
        var credentials: (id: String, secret: String)?
        if let header = request.header("Authorization"), header.prefix(6).lowercased() == "basic " {
            if let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
               let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":"),
               let id = try? FormFields.unescape(String(text[..<colon])),
               let secret = try? FormFields.unescape(String(text[text.index(after: colon)...])) {
                credentials = (id, secret)
            }
        } else if let id = form["client_id"], let secret = form["client_secret"] {
            credentials = (id, secret)
        }
        guard let credentials, let expected = secrets[credentials.id],
              constantTimeEquals(SHA256.hash(Array(credentials.secret.utf8)).bytes, expected) else {
            services.metrics.introspection(outcome: "unauthenticated")
            services.metrics.rejected(route: request.route, reason: "resource_server_credential")
            let description = secrets.isEmpty
                ? "No resource servers are configured (resource_servers): nobody may introspect."
                : "Authenticate as a configured resource server (HTTP Basic)."
            throw HTTPError(status: 401, code: "invalid_client", description: description,
                            headers: [HTTPHeader("WWW-Authenticate", #"Basic realm="token-broker""#)])
        }
        return credentials.id
    }

    /// Takes one of `server`'s requests per minute, or 429.
    private func admit(_ server: String) throws(HTTPError) {
        do throws(HTTPError) {
            try limiters[server]?.admit(server, now: services.now())
        } catch {
            services.metrics.introspection(outcome: "rate_limited")
            throw error
        }
    }

    /// RFC 7662 §2.2: `{"active": false}` alone for a token that names no live session.
    private func answer(_ session: Session?) -> Response {
        guard let session else {
            services.metrics.introspection(outcome: "inactive")
            return .json(.object([("active", .bool(false))]))
        }
        services.metrics.introspection(outcome: "active")
        return .json(.object([
            ("active", .bool(true)),
            ("sub", .string(session.subject)),
            ("provider", .string(session.provider)),
            ("client_id", .string(session.app)),
            ("scope", .string(session.scopes.joined(separator: " "))),
            ("token_type", .string(session.keyThumbprint == nil ? "Bearer" : "DPoP")),
            ("iss", .string(services.issuer(of: session.provider))),
            ("iat", .int(Int(session.createdAt))),
            ("exp", .int(Int(services.sessionEnd(session)))),
        ] + (session.keyThumbprint.map { [("cnf", .object([("jkt", .string($0))]))] } ?? [])))
    }
}

extension BrokerServices {
    /// When `session` ends unless it is used again: its absolute lifetime's end, or sooner its
    /// idle lifetime's (counted from its last use).
    func sessionEnd(_ session: Session) -> Double {
        min(session.createdAt + config.sessions.absoluteLifetimeSeconds, session.usedAt + config.sessions.idleLifetimeSeconds)
    }
}
