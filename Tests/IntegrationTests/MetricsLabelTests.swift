import Foundation
import Testing

/// Every metrics label comes from a closed set (docs/security.md): paths sent to a prefix route
/// (`/proxy/{provider}/{path}`) with an unknown session token, with a malformed path, or with no
/// token, and to no route at all, add no series to `/metrics` however many distinct ones arrive.
@Suite(.serialized)
struct MetricsLabelTests {
    @Test func distinctPathsAddNoSeries() throws {
        let broker = try BrokerProcess(arguments: ["--dev"])
        let unknown = ["Authorization": "Bearer tbs_\(String(repeating: "x", count: 43))"]
        func send(_ round: Int) throws {
            for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] {
                let statuses = [
                    try RawHTTP.request(port: broker.port, method: method, target: "/proxy/dev/\(method)-\(round)-series", headers: unknown).status,
                    try RawHTTP.request(port: broker.port, method: method, target: "/proxy/dev/a/..;/\(round)", headers: unknown).status,
                    try RawHTTP.request(port: broker.port, method: method, target: "/proxy/dev/\(round)/anonymous").status,
                    try RawHTTP.request(port: broker.port, method: method, target: "/nowhere/\(round)").status,
                ]
                #expect(statuses[0] == 401 && statuses[2] == 401 && statuses[3] == 404, "\(method) \(statuses)")
            }
        }
        try send(0)
        _ = try series(broker) // its own series, once
        let before = try series(broker)
        #expect(before.contains { $0.contains(#"route="/proxy/dev/{path}""#) && $0.hasPrefix("broker_rejected_requests_total") },
                "the rejections are counted, under the route's template")
        for round in 1...500 { try send(round) }
        let after = try series(broker)
        #expect(after == before, "new series: \(Array(after.subtracting(before).prefix(5)))")
    }

    /// The series of `/metrics` (name and labels, without values or comments).
    private func series(_ broker: BrokerProcess) throws -> Set<String> {
        let text = try broker.get("/metrics").text
        return Set(text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { line in
            String(line[..<(line.lastIndex(of: " ") ?? line.endIndex)])
        })
    }
}
