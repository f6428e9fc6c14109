import Foundation
import HTTPServer
import Synchronization
import Testing

/// An answer with a header that cannot be sent as it is (a line break in it would add a header
/// of its own) goes out as a 500 instead, and is reported as the 500 it is: the access log and
/// the metrics count what the client got.
struct UnsendableAnswerTests {
    @Test(arguments: ["/now", "/later"])
    func anAnswerWithABrokenHeaderIsSentAndReportedAsA500(_ path: String) async throws {
        let broken = Response(status: 201, headers: [HTTPHeader("X-Note", "one\r\nSet-Cookie: injected=1")], body: Array("made".utf8))
        var router = Router()
        router.add("GET", "/now") { _ in .now(broken) }
        router.add("GET", "/later") { _ in .later { answer in Thread { answer(broken) }.start() } }
        let records = Records()
        let server = try HTTPServer(configuration: .loopback, observer: records)
        try server.start(router: router)

        let client = try SocketClient(port: server.port)
        client.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(await client.read(until: "\r\n\r\n"), "an answer's head: \(client.received)")
        #expect(client.received.hasPrefix("HTTP/1.1 500 "), "\(client.received)")
        #expect(!client.received.contains("injected"))
        #expect(records.statuses == [500], "the request is reported with the status sent")
        await server.shutdown(grace: .seconds(1))
    }

    private final class Records: RequestObserver {
        private let seen = Mutex<[Int]>([])

        var statuses: [Int] { seen.withLock { $0 } }

        func requestFinished(_ record: RequestRecord) {
            seen.withLock { $0.append(record.status) }
        }

        func serverMessage(_ message: String, fromLibrary: Bool) {}
    }
}
