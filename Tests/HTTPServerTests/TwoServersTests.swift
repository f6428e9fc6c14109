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
        let stopped = try HTTPServer(configuration: Self.configuration, observer: Silent())
        let serving = try HTTPServer(configuration: Self.configuration, observer: Silent())
        try stopped.start(router: router)
        try serving.start(router: router)

        let client = try Client(port: serving.port)
        client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(await client.read(until: "first|"), "the head and the first chunk arrive at once")
        await stopped.shutdown(grace: .seconds(1))
        secondHalf.signal()
        #expect(await client.read(until: "\r\n0\r\n\r\n"), "the body ends properly: \(client.received)")
        #expect(client.received.contains("first|") && client.received.contains("second"))
        await serving.shutdown(grace: .seconds(1))
    }

    private static let configuration = ServerConfiguration(
        host: "127.0.0.1", port: 0, threads: 1, maxBodyBytes: 65_536, maxHeaderBytes: 8_192, maxURLBytes: 4_096,
        maxConnections: 64, maxConnectionsPerIP: 64, idleTimeoutSeconds: 30, requestHeadTimeoutSeconds: 10,
        requestBodyMinBytesPerSecond: 0, corsOrigins: [], trustedProxies: [], tls: nil
    )

    private struct Silent: RequestObserver {
        func requestFinished(_ record: RequestRecord) {}
        func serverMessage(_ message: String) {}
    }

    /// A plain TCP client on 127.0.0.1, reading with a timeout. Used by one test at a time, and
    /// its reads run one at a time on a dispatch thread (off Swift's task pool, which a blocking
    /// read would hold).
    private final class Client: @unchecked Sendable {
        private let socket: Int32
        private(set) var received = ""

        init(port: UInt16) throws {
            socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard socket >= 0, connected == 0 else { throw POSIXError(.ECONNREFUSED) }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(socket) }

        func send(_ text: String) {
            _ = text.utf8CString.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
        }

        /// Reads until `marker` has arrived (true), or the connection ends or stays silent for 10 s.
        func read(until marker: String) async -> Bool {
            await withCheckedContinuation { done in
                DispatchQueue.global().async { done.resume(returning: self.readBlocking(until: marker)) }
            }
        }

        private func readBlocking(until marker: String) -> Bool {
            var chunk = [UInt8](repeating: 0, count: 4096)
            while !received.contains(marker) {
                let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return false }
                received += String(decoding: chunk[..<count], as: UTF8.self)
            }
            return true
        }
    }
}
