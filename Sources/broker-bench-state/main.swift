// broker-bench-state: writes a state directory with N live sessions for the benchmark
// (bench/run.py), through the broker's own store and snapshot code (`StateFixture`), and the
// plaintext session tokens to a file for the load generator. Bench-only; not a product.
//
//   BROKER_STATE_KEY=<key> broker-bench-state --sessions N --directory DIR --tokens FILE
//       [--provider dev] [--app demo] [--issuer URL] [--access-ttl SECONDS]
//
// Prints one JSON line with what was written.
import BrokerCore
import Foundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("broker-bench-state: \(message)\n".utf8))
    exit(2)
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let name = arguments.popFirst() {
    guard name.hasPrefix("--"), let value = arguments.popFirst() else { fail("usage: --sessions N --directory DIR --tokens FILE [--provider P] [--app A] [--issuer URL] [--access-ttl S]") }
    options[String(name.dropFirst(2))] = value
}
let known: Set = ["sessions", "directory", "tokens", "provider", "app", "issuer", "access-ttl"]
if let unknown = options.keys.first(where: { !known.contains($0) }) { fail("unknown option --\(unknown)") }
guard let countText = options["sessions"], let count = Int(countText), count >= 0 else { fail("--sessions N is required") }
guard let directory = options["directory"], let tokens = options["tokens"] else { fail("--directory and --tokens are required") }
guard let key = ProcessInfo.processInfo.environment["BROKER_STATE_KEY"], !key.isEmpty else { fail("set BROKER_STATE_KEY") }
let lifetime = options["access-ttl"].flatMap(Double.init) ?? 12 * 3600

do {
    let summary = try StateFixture.writeSessions(
        count: count, provider: options["provider"] ?? "dev", app: options["app"] ?? "demo",
        directory: directory, stateKey: key, tokensFile: tokens,
        issuer: options["issuer"] ?? "http://127.0.0.1:8080/dev", accessTokenLifetime: lifetime
    )
    print(#"{"sessions":\#(summary.sessions),"snapshot_bytes":\#(summary.snapshotBytes),"token_bytes_per_session":\#(summary.tokenBytesPerSession),"payload_bytes_per_session":\#(summary.payloadBytesPerSession),"build_seconds":\#(summary.buildSeconds),"write_seconds":\#(summary.writeSeconds)}"#)
} catch {
    fail(error.description)
}
