import Dispatch
import Foundation
import HTTPServer

extension ServerConfiguration {
    /// A server of one thread on a free port of 127.0.0.1, with the broker's default limits.
    static let loopback = ServerConfiguration(
        host: "127.0.0.1", port: 0, threads: 1, maxBodyBytes: 65_536, maxHeaderBytes: 8_192, maxURLBytes: 4_096,
        maxConnections: 64, maxConnectionsPerIP: 64, idleTimeoutSeconds: 30, requestHeadTimeoutSeconds: 10,
        requestBodyMinBytesPerSecond: 0, corsOrigins: [], trustedProxies: [], tls: nil
    )
}

/// A plain TCP client on 127.0.0.1, reading with a timeout. Used by one test at a time, and
/// its reads run one at a time on a dispatch thread (off Swift's task pool, which a blocking
/// read would hold).
final class SocketClient: @unchecked Sendable {
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
