import Foundation
import HTTPServer
import Synchronization
import WireValues

/// `/readyz`: whether this instance can serve — not shutting down (from SIGTERM on, while it
/// still serves for `shutdown_delay_seconds`, so that balancers move off it first), its state
/// loaded (before it listens) and, with the embedded store, its own disk taking writes (a failed
/// journal write or snapshot fails the check until a write, or the next journal at a snapshot,
/// succeeds).
///
/// What every instance shares — the PostgreSQL database, the providers' discovery documents —
/// does not make it unready: every instance would be at once, and a Service would lose all its
/// endpoints while cached tokens still answer. Those checks say `warn` with their detail (and the
/// logs and metrics say the same), and the answer stays 200.
///
/// The answer comes from memory, never waiting on the network (a probe has a timeout of a few
/// seconds, and a provider that accepts connections but never answers would make every
/// instance's probe fail at once): a document not known yet is a `warn` with the last fetch's
/// failure, or "being fetched", while ``DiscoveryCache/withoutWaiting(_:)`` fetches it in the
/// background.
struct Readiness: Sendable {
    /// The providers configured by `issuer`.
    let providers: [ProviderConfig]
    let discovery: DiscoveryCache
    /// Why the state cannot be written, or nil.
    let stateFailure: @Sendable () -> String?
    /// Whether the state is every instance's (PostgreSQL), not this one's own disk.
    let stateShared: Bool
    /// Set once the broker is shutting down.
    let shuttingDown: ShutdownFlag

    private enum Status: String {
        case pass, warn, fail
    }

    func reply() -> Reply {
        guard !shuttingDown.isSet else {
            return .now(.json(.object([("status", .string("not_ready")), ("checks", .object([
                ("shutdown", .object([("status", .string("fail")), ("detail", .string("shutting down"))])),
            ]))]), status: 503))
        }
        let state = stateFailure().map { (stateShared ? Status.warn : .fail, $0) }
        return .now(Self.response(state: state, checks: checks()))
    }

    /// Each provider's failure: its discovery document's, else what the document lacks.
    private func checks() -> [(provider: String, failure: String?)] {
        providers.map { provider in
            guard let issuer = provider.endpoints.issuer else { return (provider.id, nil) }
            switch discovery.withoutWaiting(issuer) {
            case .failure(let error):
                return (provider.id, error.description)
            case .success(let document):
                let problems = ProviderRequirements.problems(provider, document)
                return (provider.id, problems.isEmpty ? nil : problems.joined(separator: "; "))
            }
        }
    }

    /// `{"status": "ready"|"not_ready", "checks": {"state": {"status": "pass"|"warn"|"fail",
    /// "detail": reason}, "provider:<id>": {"status": "pass"|"warn", "detail": reason}}}`
    private static func response(state: (Status, String)?, checks: [(provider: String, failure: String?)]) -> Response {
        func check(_ status: Status, _ detail: String?) -> JSONValue {
            var result: [(String, JSONValue)] = [("status", .string(status.rawValue))]
            if let detail { result.append(("detail", .string(detail))) }
            return .object(result)
        }
        let members = [("state", check(state?.0 ?? .pass, state?.1))]
            + checks.map { ("provider:\($0.provider)", check($0.failure == nil ? .pass : .warn, $0.failure)) }
        let ready = state?.0 != .fail
        return .json(
            .object([("status", .string(ready ? "ready" : "not_ready")), ("checks", .object(members))]),
            status: ready ? 200 : 503
        )
    }
}

/// Whether the broker is shutting down: set once, read by `/readyz`.
final class ShutdownFlag: Sendable {
    private let value = Atomic<Bool>(false)

    func set() {
        value.store(true, ordering: .relaxed)
    }

    var isSet: Bool { value.load(ordering: .relaxed) }
}
