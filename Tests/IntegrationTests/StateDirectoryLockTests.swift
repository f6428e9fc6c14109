import Foundation
import Testing

/// Two brokers on one state directory would interleave their journals: the second one refuses to
/// start and names the first; once the first is gone, even by `kill -9`, a new one starts.
struct StateDirectoryLockTests {
    @Test func aSecondBrokerOnOneStateDirectoryRefusesToStart() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("shared-state-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let environment = ["BROKER_STATE_DIR": directory]
        let first = try BrokerProcess(arguments: ["--dev"], environment: environment)
        do {
            _ = try BrokerProcess(arguments: ["--dev"], environment: environment)
            Issue.record("a second broker started on the same state directory")
        } catch {
            let message = "\(error)"
            #expect(message.contains("another broker (process \(first.process.processIdentifier)) is using the state directory \(directory)"), "\(message)")
        }
        #expect(try first.get("/healthz").status == 200, "the first broker goes on")
        first.signal(SIGKILL)
        _ = first.waitForExit(seconds: 10)
        let next = try BrokerProcess(arguments: ["--dev"], environment: environment)
        #expect(try next.get("/healthz").status == 200)
    }
}
