import Foundation
import HTTPServer
import Synchronization
import WireValues

/// `/readyz`: the broker is ready when its state can be written (it is loaded before the broker
/// listens; a failed journal write or snapshot fails the check until a write succeeds again),
/// every provider configured by `issuer` has had its discovery document fetched and offers what
/// its configuration relies on (``ProviderRequirements``), and it is not shutting down (from
/// SIGTERM on, while it still serves for `shutdown_delay_seconds`, so that balancers move off it
/// first).
///
/// Once every document is cached the answer comes straight from memory; otherwise the missing
/// ones are fetched (concurrently, each bounded by the upstream timeouts) while the request waits.
struct Readiness: Sendable {
    /// The providers configured by `issuer`.
    let providers: [ProviderConfig]
    let discovery: DiscoveryCache
    /// Why the state cannot be written, or nil.
    let stateFailure: @Sendable () -> String?
    /// Set once the broker is shutting down.
    let shuttingDown: ShutdownFlag

    func reply() -> Reply {
        guard !shuttingDown.isSet else {
            return .now(.json(.object([("status", .string("not_ready")), ("checks", .object([
                ("shutdown", .object([("status", .string("fail")), ("detail", .string("shutting down"))])),
            ]))]), status: 503))
        }
        let state = stateFailure()
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

    /// `{"status": "ready"|"not_ready", "checks": {"state": {"status": "pass"|"fail", "detail": reason},
    /// "provider:<id>": {"status": "pass"|"fail", "detail": reason}}}`
    private static func response(state: String?, checks: [(provider: String, failure: String?)]) -> Response {
        func check(_ failure: String?) -> JSONValue {
            var result: [(String, JSONValue)] = [("status", .string(failure == nil ? "pass" : "fail"))]
            if let failure { result.append(("detail", .string(failure))) }
            return .object(result)
        }
        let members = [("state", check(state))] + checks.map { ("provider:\($0.provider)", check($0.failure)) }
        let ready = state == nil && checks.allSatisfy { $0.failure == nil }
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
