import Foundation
import HTTPServer

/// `/readyz`: the broker is ready when its state is loaded (in memory, it is as soon as it runs)
/// and every provider configured by `issuer` has had its discovery document fetched.
///
/// Once every document is cached the answer comes straight from memory; otherwise the missing
/// ones are fetched (concurrently, each bounded by the upstream timeouts) while the request waits.
struct Readiness: Sendable {
    let issuers: [(provider: String, issuer: URL)]
    let discovery: DiscoveryCache

    func reply() -> Reply {
        let missing = issuers.filter { discovery.cached($0.issuer) == nil }
        guard !missing.isEmpty else { return .now(Self.response(checks: issuers.map { ($0.provider, nil) })) }
        return .later { [issuers, discovery] in
            let failures = await withTaskGroup(of: (String, String?).self) { group in
                for (provider, issuer) in missing {
                    group.addTask {
                        do throws(DiscoveryError) {
                            _ = try await discovery.document(for: issuer)
                            return (provider, nil)
                        } catch {
                            return (provider, error.description)
                        }
                    }
                }
                var failures: [String: String] = [:]
                for await (provider, failure) in group { failures[provider] = failure }
                return failures
            }
            return Self.response(checks: issuers.map { ($0.provider, failures[$0.provider] ?? nil) })
        }
    }

    /// `{"status": "ready"|"not_ready", "checks": {"state": {"status": "pass"},
    /// "provider:<id>": {"status": "pass"|"fail", "detail": reason}}}`
    private static func response(checks: [(provider: String, failure: String?)]) -> Response {
        var members: [(String, JSONValue)] = [("state", .object([("status", .string("pass"))]))]
        for check in checks {
            var result: [(String, JSONValue)] = [("status", .string(check.failure == nil ? "pass" : "fail"))]
            if let failure = check.failure { result.append(("detail", .string(failure))) }
            members.append(("provider:\(check.provider)", .object(result)))
        }
        let ready = checks.allSatisfy { $0.failure == nil }
        return .json(
            .object([("status", .string(ready ? "ready" : "not_ready")), ("checks", .object(members))]),
            status: ready ? 200 : 503
        )
    }
}
