#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A minimal HTTP/1.1 client over a plain socket, so tests control every byte they send
/// (oversized headers, huge bodies, slow requests) and see exactly what the broker answers.
struct RawHTTPResponse {
    let status: Int
    let headers: [String: String]
    let body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }

    func json() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw RawHTTPError(description: "the body is not a JSON object")
        }
        return object
    }
}

struct RawHTTPError: Error, CustomStringConvertible {
    let description: String
}

final class RawConnection {
    private let descriptor: Int32

    /// A connection to 127.0.0.1:`port`, from `source` (another loopback address: another client)
    /// when given.
    init(port: UInt16, timeoutSeconds: Int = 15, source: String? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw RawHTTPError(description: "socket() failed") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else { throw RawHTTPError(description: "bind to \(source) failed (errno \(errno))") }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        // No close here: a class whose initializer throws after its properties are set still
        // runs `deinit`, which closes the socket (closing twice could close another test's).
        guard connected == 0 else {
            throw RawHTTPError(description: "connect to port \(port) failed (errno \(errno))")
        }
    }

    deinit {
        close(descriptor)
    }

    /// Sends bytes; stops quietly when the server has closed the connection. Returns whether
    /// every byte was sent.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Whether the server ends the connection (end of stream or reset) within `seconds`, reading
    /// and dropping anything it sends before.
    func endsWithin(seconds: Double) -> Bool {
        bytesUntilEnd(seconds: seconds) != nil
    }

    /// What the server sends until it ends the connection (end of stream or reset) within
    /// `seconds`; nil when it does not end it in time.
    func bytesUntilEnd(seconds: Double) -> [UInt8]? {
        let deadline = Date().addingTimeInterval(seconds)
        var received: [UInt8] = []
        while Date() < deadline {
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return received }
            received += chunk[..<count]
        }
        return nil
    }

    /// Sends `bytes` one at a time, `interval` seconds apart, until the server ends the connection
    /// or `seconds` have passed. Returns after how many seconds the server ended it, or nil.
    func trickle(_ bytes: [UInt8], interval: Double, upTo seconds: Double) -> Double? {
        let started = Date()
        var next = bytes.startIndex
        while Date().timeIntervalSince(started) < seconds {
            if next < bytes.endIndex {
                guard send([bytes[next]]) else { return Date().timeIntervalSince(started) }
                next += 1
            }
            if endsWithin(seconds: interval) { return Date().timeIntervalSince(started) }
        }
        return nil
    }

    /// Reads one response (Content-Length framed, or until the server closes).
    func readResponse() throws -> RawHTTPResponse {
        var buffer: [UInt8] = []
        var headerEnd: Int?
        var expected: Int?
        while true {
            if let end = headerEnd, let expected, buffer.count >= end + expected { break }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 {
                if headerEnd != nil { break }
                throw RawHTTPError(description: "connection closed or timed out before a response (errno \(errno))")
            }
            buffer += chunk[..<count]
            if headerEnd == nil, let range = findHeaderEnd(buffer) {
                headerEnd = range
                let head = String(decoding: buffer[..<range], as: UTF8.self)
                expected = Self.parseHeaders(head).1["content-length"].flatMap { Int($0) }
            }
        }
        guard let end = headerEnd else { throw RawHTTPError(description: "no header end") }
        let (status, headers) = Self.parseHeaders(String(decoding: buffer[..<end], as: UTF8.self))
        let body = Array(buffer[end...].prefix(expected ?? Int.max))
        return RawHTTPResponse(status: status, headers: headers, body: body)
    }

    private func findHeaderEnd(_ buffer: [UInt8]) -> Int? {
        guard buffer.count >= 4 else { return nil }
        for index in 0...(buffer.count - 4)
        where buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
            return index + 4
        }
        return nil
    }

    private static func parseHeaders(_ head: String) -> (Int, [String: String]) {
        let lines = head.components(separatedBy: "\r\n")
        let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers)
    }
}

enum RawHTTP {
    /// One request on a fresh connection.
    static func request(
        port: UInt16, method: String = "GET", target: String, headers: [String: String] = [:], body: [UInt8] = []
    ) throws -> RawHTTPResponse {
        let connection = try RawConnection(port: port)
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        connection.send(head + "\r\n")
        connection.send(body)
        return try connection.readResponse()
    }
}
