import Dispatch
import Foundation
import HTTPServer
import Testing

/// Two servers in one process: each keeps its own streamed answers (the shim's list of open
/// streams is per server), so stopping one leaves the other's answers alone.
struct TwoServersTests {
    @Test func stoppingOneServerLeavesTheOthersStreamAlone() async throws {
        let secondHalf = DispatchSemaphore(value: 0)
        var router = Router()
        // Answered at once, its body written by a thread of its own: nothing waits for Swift's
        // task pool, which the blocking reads below and other suites may fill.
        router.add("GET", "/stream") { _ in
            guard let stream = ResponseStream(capacity: 1024) else { return .now(Response(status: 503)) }
            Thread {
                let first = "first|".utf8.withContiguousStorageIfAvailable { stream.offer(UnsafeRawBufferPointer($0), wake: { _, _ in }, context: nil, tag: 0) == .taken }
                secondHalf.wait()
                let second = "second".utf8.withContiguousStorageIfAvailable { stream.offer(UnsafeRawBufferPointer($0), wake: { _, _ in }, context: nil, tag: 0) == .taken }
                stream.finish(ok: first == true && second == true)
            }.start()
            return .now(Response(status: 200, stream: stream))
        }
        let stopped = try HTTPServer(configuration: ServerConfiguration.loopback, observer: Silent())
        let serving = try HTTPServer(configuration: ServerConfiguration.loopback, observer: Silent())
        try stopped.start(router: router)
        try serving.start(router: router)

        let client = try SocketClient(port: serving.port)
        client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(await client.read(until: "first|"), "the head and the first chunk arrive at once")
        await stopped.shutdown(grace: .seconds(1))
        secondHalf.signal()
        #expect(await client.read(until: "\r\n0\r\n\r\n"), "the body ends properly: \(client.received)")
        #expect(client.received.contains("first|") && client.received.contains("second"))
        await serving.shutdown(grace: .seconds(1))
    }

    private struct Silent: RequestObserver {
        func requestFinished(_ record: RequestRecord) {}
        func serverMessage(_ message: String, fromLibrary: Bool) {}
    }
}
