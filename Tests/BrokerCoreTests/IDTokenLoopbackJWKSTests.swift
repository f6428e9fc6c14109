import BrokerCore
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The key set fetched for real, with `UpstreamClient`, from an HTTP server on loopback.
struct IDTokenLoopbackJWKSTests {
    @Test func keySetIsFetchedOverHTTPOnceAndRefetchedOncePerInterval() async throws {
        let server = try LoopbackJWKSServer(status: 200, body: try IDTokenVectors.text("jwks.json"))
        defer { server.stop() }
        let clock = TestClock(Date(timeIntervalSince1970: 2_000_000_000))
        let cache = JWKSCache(client: try #require(UpstreamClient(limits: Limits().upstream)), clock: clock.closure)
        let verifier = IDTokenVerifier(jwks: cache, clock: clock.closure)
        let uri = try #require(URL(string: "http://127.0.0.1:\(server.port)/jwks"))

        func verify(_ name: String) async throws -> IDTokenError? {
            await verificationError(verifier, try IDTokenVectors.token(name), jwksURI: uri)
        }

        #expect(try await verify("valid-rs256") == nil)
        #expect(try await verify("valid-es256") == nil)
        #expect(server.requests == 1)
        for _ in 0..<20 { #expect(try await verify("unknown-kid") == .unknownKey) }
        #expect(server.requests == 1)
        clock.advance(by: 61)
        for _ in 0..<20 { #expect(try await verify("unknown-kid") == .unknownKey) }
        #expect(server.requests == 2)
    }

    @Test func errorStatusIsUnavailableAndNamesOnlyTheHost() async throws {
        let server = try LoopbackJWKSServer(status: 500, body: #"{"secret": "do-not-echo"}"#)
        defer { server.stop() }
        let verifier = IDTokenVerifier(jwks: JWKSCache(client: try #require(UpstreamClient(limits: Limits().upstream))))
        let uri = try #require(URL(string: "http://127.0.0.1:\(server.port)/jwks?x=1"))
        let error = await verificationError(verifier, try IDTokenVectors.token("valid-rs256"), jwksURI: uri)
        #expect(error == .jwksUnavailable("127.0.0.1 answered HTTP 500"))
        #expect(error?.description.contains("do-not-echo") == false)
        #expect(error?.description.contains("x=1") == false)
    }
}

/// A one-route HTTP/1.1 server on 127.0.0.1 and a free port, answering every request with one
/// status and body and counting requests. Blocking sockets on a thread of its own.
private final class LoopbackJWKSServer: Sendable {
    let port: UInt16
    private let listener: Int32
    private let count = Mutex(0)

    var requests: Int { count.withLock { $0 } }

    init(status: Int, body: String) throws {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(fd, socketAddress, length) == 0 && listen(fd, 16) == 0
                    && getsockname(fd, socketAddress, &length) == 0
            }
        }
        guard fd >= 0, bound else {
            if fd >= 0 { close(fd) }
            throw LoopbackServerError()
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        let response = Array("HTTP/1.1 \(status) X\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
        Thread.detachNewThread { [self] in serve(response) }
    }

    /// Closes the listening socket, which ends the accept loop.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve(_ response: [UInt8]) {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            var request: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !request.ends(with: Array("\r\n\r\n".utf8)) {
                let received = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                guard received > 0 else { break }
                request.append(contentsOf: buffer[0..<received])
            }
            count.withLock { $0 += 1 }
            _ = response.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, 0) }
            close(connection)
        }
    }
}

private struct LoopbackServerError: Error {}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
