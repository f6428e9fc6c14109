import BrokerCrypto
import HTTPServer
import WireValues

/// The admin API (docs/admin.md; off unless configured): list sessions by provider,
/// app, subject or provider session — their metadata, never a token —, end one, end every
/// session of a subject. On a listener of its own, or on the public one behind a bearer token
/// (`admin.token_file`), compared in constant time. Every action is an audit event
/// (``AuditTrail``); a refused call is a log line. Without a token (a loopback listener of its
/// own), a request a web page could have sent — one with `Origin`, a cross-site
/// `Sec-Fetch-Site`, or a `Host` that is not loopback (DNS rebinding) — is refused.
struct AdminRoutes: Sendable {
    let config: BrokerConfig
    let metrics: BrokerMetrics
    let administration: SessionAdministration
    let audit: AuditTrail
    /// The SHA-256 of the token every call must carry; nil: none (a loopback listener of its own).
    private let tokenHash: [UInt8]?

    init(config: BrokerConfig, metrics: BrokerMetrics, administration: SessionAdministration, audit: AuditTrail, token: Secret?) {
        self.config = config
        self.metrics = metrics
        self.administration = administration
        self.audit = audit
        tokenHash = token.map { SHA256.hash(Array($0.reveal().utf8)).bytes }
    }

    /// Where its routes are: no route of another kind is under it.
    static let pathPrefix = "/admin/"

    func register(in routes: inout RouteTable) {
        routes.add("GET", "/admin/sessions", Self.policy(body: .none)) { [self] request throws(HTTPError) in try list(request) }
        routes.add("POST", "/admin/sessions/end", Self.policy(body: .form)) { [self] request throws(HTTPError) in try end(request) }
        routes.add("POST", "/admin/subjects/end", Self.policy(body: .form)) { [self] request throws(HTTPError) in try endSubject(request) }
    }

    /// An operator's call: the token (256 bits, compared in constant time) or this machine only.
    private static func policy(body: RoutePolicy.Body) -> RoutePolicy {
        RoutePolicy(caller: .operator, limit: .none(because: "the admin token cannot be guessed, and without one only this machine calls"),
                    body: body)
    }

    /// `Authorization: Bearer <admin token>`, when one is configured: both sides hashed first,
    /// so that the comparison's time says nothing, not even the token's length.
    private func authenticate(_ request: Request) throws(HTTPError) {
        guard let tokenHash else { return try refuseBrowsers(request) }
        let given = request.header("Authorization").flatMap { header -> String? in
            guard header.count > 7, header.prefix(7).lowercased() == "bearer " else { return nil }
            return String(header.dropFirst(7))
        }
        guard let given, constantTimeEquals(SHA256.hash(Array(given.utf8)).bytes, tokenHash) else {
            refused(request, reason: "admin_credential")
            throw HTTPError(status: 401, code: "invalid_token", description: "Send the admin token as Authorization: Bearer <token>.",
                            headers: [HTTPHeader("WWW-Authenticate", #"Bearer realm="admin", error="invalid_token""#)])
        }
    }

    /// Without a token, only a client on this machine that is not a web page: a browser adds
    /// `Origin` to a cross-origin POST and `Sec-Fetch-Site` to every request, and a rebound name
    /// arrives with its own `Host`. A refusal is logged and counted as a wrong token is: these
    /// are the cross-site and rebinding probes the check is for.
    private func refuseBrowsers(_ request: Request) throws(HTTPError) {
        let site = request.header("Sec-Fetch-Site")?.lowercased()
        let host = request.header("Host").map(Self.hostName) ?? ""
        guard request.header("Origin") == nil, site == nil || site == "none",
              ["127.0.0.1", "localhost", "[::1]", "::1"].contains(host) else {
            refused(request, reason: "admin_web_page")
            throw HTTPError(status: 403, code: "forbidden",
                            description: "The admin API without a token answers only clients on this machine, not web pages; configure admin.token_file to call it otherwise.")
        }
    }

    /// A refused call: an `admin.refused` line and a count, never a webhook event (anyone can send
    /// them).
    private func refused(_ request: Request, reason: String) {
        metrics.rejected(route: request.route, reason: reason)
        audit.refused("admin.refused", [("route", .string(request.route)), ("client", .string(request.clientIP))])
    }

    /// The host of a `Host` header, without its port, lowercased.
    private static func hostName(_ header: String) -> String {
        let value = header.lowercased()
        if value.hasPrefix("[") { return value.split(separator: "]", maxSplits: 1).first.map { $0 + "]" } ?? value }
        return value.split(separator: ":", maxSplits: 1).first.map(String.init) ?? value
    }

    private func list(_ request: Request) throws(HTTPError) -> Reply {
        try authenticate(request)
        let query = try request.query()
        try Self.takesOnly(["provider", "app", "subject", "sid", "after", "limit"], query)
        guard request.body.isEmpty else { throw .badRequest("This call takes its parameters in the query, not in a body.") }
        let filter = try filter(query)
        let after = try query.optional("after").map { text throws(HTTPError) in try Self.sessionID(text) }
        let limit = try query.optional("limit").map { text throws(HTTPError) -> Int in
            guard let limit = Int(text), (1...SessionAdministration.pageLimit).contains(limit) else {
                throw .badRequest("limit must be a whole number from 1 to \(SessionAdministration.pageLimit).")
            }
            return limit
        } ?? 100
        let client = request.clientIP
        return .deferredCatching { [self] () async throws(HTTPError) -> Response in
            let page: SessionPage
            do throws(StateReadError) {
                page = try await administration.list(filter, after: after, limit: limit)
            } catch {
                throw error.httpError
            }
            audit.record("admin.sessions_listed", Self.fields(filter) + [("count", .int(page.sessions.count)), ("client", .string(client))])
            return .json(.object([
                ("sessions", .array(page.sessions.map(Self.metadata))),
                ("next", page.next.map { .string($0.hex) } ?? .null),
            ]))
        }
    }

    private func end(_ request: Request) throws(HTTPError) -> Reply {
        try authenticate(request)
        let form = try Self.formOnly(request)
        try Self.takesOnly(["session"], form)
        let id = try Self.sessionID(try form.required("session"))
        let client = request.clientIP
        return .deferredCatching { [self] () async throws(HTTPError) -> Response in
            let ended: (session: EndedGrant, revocation: ProviderRevocation)?
            do throws(StateWriteError) {
                ended = try await administration.end(id)
            } catch {
                throw error.httpError
            }
            var fields: [(String, JSONValue)] = [("session", .string(id.hex)), ("ended", .bool(ended != nil))]
            if let ended {
                fields += [("provider", .string(ended.session.provider)), ("app", .string(ended.session.app)),
                           ("subject", .string(ended.session.subject)), ("provider_revocation", .string(ended.revocation.rawValue))]
            }
            audit.record("admin.session_ended", fields + [("client", .string(client))])
            return .json(.object([
                ("ended", .bool(ended != nil)),
                ("provider_revocation", .string(ended?.revocation.rawValue ?? "not_attempted")),
            ]))
        }
    }

    private func endSubject(_ request: Request) throws(HTTPError) -> Reply {
        try authenticate(request)
        let form = try Self.formOnly(request)
        try Self.takesOnly(["provider", "subject"], form)
        let provider = try form.required("provider")
        guard config.provider(id: provider) != nil else { throw .badRequest("Unknown provider.") }
        let subject = try form.required("subject")
        let filter = SessionFilter(provider: provider, subject: subject)
        let client = request.clientIP
        return .deferredCatching { [self] () async throws(HTTPError) -> Response in
            let ended: SessionAdministration.Ended
            do throws(AdministrationError) {
                ended = try await administration.endSubject(subject, at: provider)
            } catch {
                // What ended before the store failed stays ended: the line says which, and that
                // the end is incomplete (the operator calls again).
                let (failure, partial): (HTTPError, GrantEndings.SignedOut) = switch error {
                case .read(let failure, let partial): (failure.httpError, partial)
                case .write(let failure, let partial): (failure.httpError, partial)
                }
                audit.record("admin.subject_ended", Self.fields(filter) + Self.endedFields(partial) + [("complete", .bool(false)), ("client", .string(client))])
                throw failure
            }
            let revocations = JSONValue.object(ProviderRevocation.allCases.map {
                ($0.rawValue, .int(ended.revocations[$0, default: 0]))
            })
            let sessions = ended.signedOut.sessions.compactMap(\.sessionID)
            let signIns = ended.signedOut.signIns.count
            audit.record("admin.subject_ended", Self.fields(filter) + Self.endedFields(ended.signedOut) + [
                ("provider_revocation", revocations), ("client", .string(client)),
            ])
            return .json(.object([
                ("ended", .int(sessions.count)), ("pending_sign_ins_ended", .int(signIns)), ("provider_revocation", revocations),
            ]))
        }
    }

    /// The filter of a listing: `provider`, `app`, `subject` and `sid`, each optional, a subject
    /// or `sid` only with its provider.
    private func filter(_ query: FormFields) throws(HTTPError) -> SessionFilter {
        let filter = SessionFilter(provider: try query.optional("provider"), app: try query.optional("app"),
                                   subject: try query.optional("subject"), providerSessionID: try query.optional("sid"))
        guard filter.isValid else { throw .badRequest("A subject or sid is a provider's: give the provider too.") }
        if let provider = filter.provider, config.provider(id: provider) == nil { throw .badRequest("Unknown provider.") }
        if let app = filter.app, config.app(id: app) == nil { throw .badRequest("Unknown app.") }
        return filter
    }

    /// What a subject's end ended, for its audit line: how many sessions and sign-ins under way,
    /// and the sessions' ids.
    private static func endedFields(_ ended: GrantEndings.SignedOut) -> [(String, JSONValue)] {
        let sessions = ended.sessions.compactMap(\.sessionID)
        return [("ended", .int(sessions.count)), ("pending_sign_ins_ended", .int(ended.signIns.count)),
                ("sessions", .array(sessions.map { .string($0.hex) }))]
    }

    /// The body's form of a call that changes something; a parameter in the query would be
    /// read by no one (`?app=` would not narrow `subjects/end`), so it is refused.
    private static func formOnly(_ request: Request) throws(HTTPError) -> FormFields {
        guard request.rawQuery?.isEmpty ?? true else {
            throw .badRequest("This call takes its parameters in a form body, not in the query.")
        }
        return try request.form()
    }

    /// A 400 for a parameter the call does not take, before it does anything: `app=` sent to end
    /// a subject's sessions must not end every app's while seeming to narrow it.
    private static func takesOnly(_ names: Set<String>, _ fields: FormFields) throws(HTTPError) {
        guard let unknown = fields.names.first(where: { !names.contains($0) }) else { return }
        throw .badRequest("This call takes no parameter \(String(unknown.prefix(64))); it takes \(names.sorted().joined(separator: ", ")).")
    }

    private static func fields(_ filter: SessionFilter) -> [(String, JSONValue)] {
        [("provider", filter.provider), ("app", filter.app), ("subject", filter.subject), ("sid", filter.providerSessionID)]
            .compactMap { name, value in value.map { (name, .string($0)) } }
    }

    /// A session's id as the admin API shows it: the hex of its token's SHA-256 (never the token).
    private static func sessionID(_ text: String) throws(HTTPError) -> SHA256Digest {
        guard text.utf8.count == 64, let id = SHA256Digest(hex: text) else {
            throw .badRequest("A session id is 64 hexadecimal digits, as GET /admin/sessions gives it.")
        }
        return id
    }

    /// What the admin API tells of a session: never a token.
    private static func metadata(_ session: Session) -> JSONValue {
        .object([
            ("id", .string(session.id.hex)),
            ("app", .string(session.app)),
            ("provider", .string(session.provider)),
            ("subject", .string(session.subject)),
            ("sid", session.providerSessionID.map(JSONValue.string) ?? .null),
            ("scopes", .array(session.scopes.map(JSONValue.string))),
            ("created_at", .string(Timestamp.format(seconds: Int(session.createdAt)))),
            ("used_at", .string(Timestamp.format(seconds: Int(session.usedAt)))),
        ])
    }
}
