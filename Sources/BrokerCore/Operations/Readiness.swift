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
/// Once every document is cached the answer comes straight from memory; otherwise the missing
/// ones are asked of the `DiscoveryCache` (concurrently, each bounded by the upstream timeouts)
/// while the request waits: a fetch, or the failure of one less than `retryDelay` ago.
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
        let missing = providers.filter { provider in provider.endpoints.issuer.map { discovery.cached($0) == nil } ?? false }
        guard !missing.isEmpty else { return .now(Self.response(state: state, checks: checks([:]))) }
        return .deferred { [self] in
            let failures = await withTaskGroup(of: (String, String?).self) { group in
                for provider in missing {
                    guard let issuer = provider.endpoints.issuer else { continue }
                    group.addTask {
                        do throws(DiscoveryError) {
                            _ = try await discovery.document(for: issuer)
                            return (provider.id, nil)
                        } catch {
                            return (provider.id, error.description)
                        }
                    }
                }
                var failures: [String: String] = [:]
                for await (provider, failure) in group { failures[provider] = failure }
                return failures
            }
            return Self.response(state: state, checks: checks(failures))
        }
    }

    /// Each provider's failure: its discovery document's fetch, else what the document lacks.
    private func checks(_ fetchFailures: [String: String]) -> [(provider: String, failure: String?)] {
        providers.map { provider in
            if let failure = fetchFailures[provider.id] { return (provider.id, failure) }
            guard let issuer = provider.endpoints.issuer, let document = discovery.cached(issuer) else { return (provider.id, nil) }
            let problems = ProviderRequirements.problems(provider, document)
            return (provider.id, problems.isEmpty ? nil : problems.joined(separator: "; "))
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
