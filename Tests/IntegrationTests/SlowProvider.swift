#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// A stand-in for a provider's discovery endpoint that takes its time: it answers every request
/// with a valid discovery document after `delay`, or never when `delay` is nil. It exists to
/// hold a broker request suspended while the test signals the broker.
final class SlowProvider: @unchecked Sendable {
    // Shared with the accept thread: `listener`, set once before the thread starts, and the
    // request counter, which is atomic.
    let port: UInt16
    private let listener: Int32
    private let received = RequestCounter()

    /// Requests the provider has read so far (a broker request is suspended on each).
    var requests: Int { received.count }

    var issuer: String { "http://127.0.0.1:\(port)" }

    init(delay: Double?) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 16) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else { throw RawHTTPError(description: "cannot listen for the slow provider") }
        port = UInt16(bigEndian: address.sin_port)
        let issuer = "http://127.0.0.1:\(port)"
        let received = received
        Thread.detachNewThread {
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 { return }
                Thread.detachNewThread {
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    _ = recv(client, &buffer, buffer.count, 0)
                    received.add()
                    guard let delay else { return } // hold the connection open, answer nothing
                    usleep(UInt32(delay * 1_000_000))
                    let body = """
                        {"issuer":"\(issuer)","authorization_endpoint":"\(issuer)/authorize",\
                        "token_endpoint":"\(issuer)/token","jwks_uri":"\(issuer)/jwks"}
                        """
                    let response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
                    _ = Array(response.utf8).withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    close(client)
                }
            }
        }
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

final class RequestCounter: Sendable {
    private let value = Atomic<Int>(0)

    func add() { value.add(1, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }
}
