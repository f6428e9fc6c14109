import Foundation
import Testing
import TestWaiting

/// Request heads that frame a body ambiguously or are malformed in ways libmicrohttpd lets
/// through (request-smuggling building blocks, RFC 9112 §3.2, §5, §6.1, §6.3): each gets the
/// broker's JSON error with its security headers, and the connection closes, so that a request
/// smuggled behind it is never answered.
@Suite(.serialized)
struct FramingTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let head: String
        let status: Int
        var testDescription: String { name }
    }

    /// Each head is followed by a smuggled `GET /healthz` that must not be answered.
    static let cases = [
        Case(name: "Content-Length and Transfer-Encoding",
             head: "POST /token HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 400),
        Case(name: "Transfer-Encoding and Content-Length",
             head: "POST /token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", status: 400),
        Case(name: "two different Content-Length values",
             head: "POST /token HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 38\r\n\r\n", status: 400),
        Case(name: "Transfer-Encoding not ending with chunked",
             head: "POST /token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", status: 400),
        Case(name: "a transfer coding other than chunked",
             head: "POST /token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", status: 501),
        Case(name: "whitespace before a colon",
             head: "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length : 38\r\n\r\n", status: 400),
        Case(name: "a NUL in the target", head: "GET /healthz\0/x HTTP/1.1\r\nHost: x\r\n\r\n", status: 400),
        Case(name: "a NUL in a header value", head: "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b\0c\r\n\r\n", status: 400),
        Case(name: "HTTP/1.1 without Host", head: "GET /healthz HTTP/1.1\r\n\r\n", status: 400),
        Case(name: "two Host headers", head: "GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", status: 400),
        Case(name: "a bare CR in a header value (a line's end to a proxy in front)",
             head: "POST /token HTTP/1.1\r\nHost: x\r\nX-A: b\rTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\na=b", status: 400),
        Case(name: "a control byte in a header name", head: "GET /healthz HTTP/1.1\r\nHost: x\r\nX\u{01}A: b\r\n\r\n", status: 400),
        Case(name: "two Authorization headers",
             head: "GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nauthorization: Bearer b\r\n\r\n", status: 400),
        Case(name: "a NUL in the method", head: "GE\0T /healthz HTTP/1.1\r\nHost: x\r\n\r\n", status: 400),
        Case(name: "a method that is not a token", head: "GE(T /healthz HTTP/1.1\r\nHost: x\r\n\r\n", status: 400),
        Case(name: "an absolute-form target naming another host than Host",
             head: "GET http://y/healthz HTTP/1.1\r\nHost: x\r\n\r\n", status: 400),
        Case(name: "an absolute-form target with user information",
             head: "GET http://u:pw-in-a-target@x/healthz HTTP/1.1\r\nHost: u@x\r\n\r\n", status: 400),
    ]

    private static let smuggled = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"

    @Test(arguments: cases)
    func isRefusedAndClosed(_ test: Case) throws {
        let broker = try BrokerProcess()
        let connection = try RawConnection(port: broker.port)
        connection.send(test.head + Self.smuggled)
        let response = try connection.readResponse()
        #expect(response.status == test.status)
        #expect(try response.json()["error"] as? String == "invalid_request")
        #expect(response.headers["x-content-type-options"] == "nosniff")
        #expect(response.headers["connection"]?.lowercased() == "close")
        let rest = connection.bytesUntilEnd(seconds: 3)
        #expect(rest != nil, "the connection must close after the answer")
        #expect(rest?.isEmpty == true, "the smuggled request must not be answered")
        try waitUntilBlocking("the refusal is in the access log") { broker.jsonLines.contains { $0["status"] as? Int == test.status } }
        #expect(!broker.lines.contains { $0.contains("pw-in-a-target") }, "user information never reaches the log")
    }

    /// The negative control: heads the checks must let through, on one kept-alive connection
    /// (bare line feeds, a cookie, a long header, a body, HTTP/1.0 without Host).
    @Test func wellFormedRequestsKeepTheConnection() throws {
        let broker = try BrokerProcess()
        let connection = try RawConnection(port: broker.port)
        let missingGrantType = "Missing required parameter grant_type." // the body was read and routed
        let requests: [(head: String, status: Int, description: String?)] = [
            ("GET /healthz HTTP/1.1\nHost: x\nX-A:b\n\n", 200, nil),
            ("GET /healthz HTTP/1.1\r\nHost: x\r\nCookie: a=b; c=d\r\nX-Long: \(String(repeating: "l", count: 6000))\r\n\r\n", 200, nil),
            ("POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\n\r\na=b",
             400, missingGrantType),
            ("POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n3\r\na=b\r\n0\r\n\r\n",
             400, missingGrantType),
            ("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200, nil),
            // The absolute form a server must accept (RFC 9112 3.2.2), its authority the Host.
            ("GET HTTP://X/healthz?a=b HTTP/1.1\r\nHost: x\r\n\r\n", 200, nil),
            ("GET http://x/healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200, nil),
        ]
        for request in requests {
            connection.send(request.head)
            let response = try connection.readResponse()
            #expect(response.status == request.status)
            if let description = request.description {
                #expect(try response.json()["error_description"] as? String == description)
            }
            #expect(response.headers["connection"]?.lowercased() != "close")
        }
    }
}
