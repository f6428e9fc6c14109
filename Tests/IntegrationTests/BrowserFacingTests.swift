import Foundation
import Testing
import TestWaiting

/// Abuse limits and browser-facing headers on the real binary.
@Suite(.serialized)
struct BrowserFacingTests {
    @Test func loginEndpointsAreRateLimitedPerClient() throws {
        let broker = try BrokerProcess(config: "server:\n  limits:\n    login_requests_per_minute: 5\n")
        for _ in 0..<5 {
            #expect(try broker.get("/authorize?provider=x").status == 400)
        }
        let limited = try broker.get("/authorize?provider=x")
        #expect(limited.status == 429)
        #expect(try limited.json()["error"] as? String == "rate_limited")
        let retryAfter = Int(limited.headers["retry-after"] ?? "") ?? 0
        #expect((1...12).contains(retryAfter))
        #expect(try broker.get("/callback?state=x").status == 429, "the callback shares the login budget")
        #expect(try broker.get("/healthz").status == 200, "other endpoints are not limited")
        let metrics = try broker.get("/metrics").text
        #expect(metrics.contains(#"broker_rejected_requests_total{route="/authorize",reason="rate_limited"} 1"#))
    }

    @Test func behindATrustedProxyTheForwardedClientIsLimitedAndLogged() throws {
        let broker = try BrokerProcess(config: "server:\n  trusted_proxies: 127.0.0.0/8\n  limits:\n    login_requests_per_minute: 2\n")
        let first = ["X-Forwarded-For": "203.0.113.7"]
        for _ in 0..<2 {
            #expect(try broker.get("/authorize?provider=x", headers: first).status == 400)
        }
        #expect(try broker.get("/authorize?provider=x", headers: first).status == 429)
        let claimsToBeAnother = ["X-Forwarded-For": "203.0.113.7, 198.51.100.9"]
        #expect(try broker.get("/authorize?provider=x", headers: claimsToBeAnother).status == 400,
                "the proxy's entry names the client, whatever the client wrote to its left")
        // The header given twice is one list: its right end is the client.
        let connection = try RawConnection(port: broker.port)
        connection.send("GET /authorize?provider=x HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.9\r\n"
                        + "X-Forwarded-For: 203.0.113.7\r\nConnection: close\r\n\r\n")
        #expect(try connection.readResponse().status == 429)
        try waitUntilBlocking("the five requests are in the access log") { broker.jsonLines.filter { $0["msg"] as? String == "request" }.count == 5 }
        let lines = broker.jsonLines.filter { $0["msg"] as? String == "request" }
        // Sorted: lines of different server threads may reach the log out of order.
        #expect(lines.compactMap { $0["client"] as? String }.sorted()
                == ["198.51.100.9", "203.0.113.7", "203.0.113.7", "203.0.113.7", "203.0.113.7"])
        #expect(lines.allSatisfy { $0["proxy"] as? String == "127.0.0.1" }, "the proxy that named the client")
    }

    /// What starts a sign-in makes state, so an IPv6 client counts by its site's /56 there (a
    /// site has 256 /64s to step through); elsewhere by its /64.
    @Test func anIPv6ClientStartsSignInsByItsSlash56() throws {
        let broker = try BrokerProcess(config: "server:\n  trusted_proxies: 127.0.0.0/8\n  limits:\n    login_requests_per_minute: 2\n")
        for address in ["2001:db8:1:2::1", "2001:db8:1:3::2"] {
            #expect(try broker.get("/authorize?provider=x", headers: ["X-Forwarded-For": address]).status == 400)
        }
        #expect(try broker.get("/authorize?provider=x", headers: ["X-Forwarded-For": "2001:db8:1:ff:ffff:ffff:ffff:9"]).status == 429,
                "every /64 of one /56 is one client")
        #expect(try broker.get("/authorize?provider=x", headers: ["X-Forwarded-For": "2001:db8:1:100::1"]).status == 400,
                "the next /56 is another client")
    }

    @Test func forwardedForIsIgnoredFromAnUntrustedAddress() throws {
        let broker = try BrokerProcess(config: "server:\n  trusted_proxies: 10.0.0.0/8\n  limits:\n    login_requests_per_minute: 2\n")
        #expect(try broker.get("/authorize?provider=x", headers: ["X-Forwarded-For": "203.0.113.1"]).status == 400)
        #expect(try broker.get("/authorize?provider=x", headers: ["X-Forwarded-For": "203.0.113.2"]).status == 400)
        #expect(try broker.get("/authorize?provider=x", headers: ["X-Forwarded-For": "203.0.113.3"]).status == 429,
                "one client, the connection's address, whatever it claims")
        try waitUntilBlocking("the three requests are in the access log") { broker.jsonLines.filter { $0["msg"] as? String == "request" }.count == 3 }
        let lines = broker.jsonLines.filter { $0["msg"] as? String == "request" }
        #expect(lines.compactMap { $0["client"] as? String } == ["127.0.0.1", "127.0.0.1", "127.0.0.1"])
        #expect(lines.allSatisfy { $0["proxy"] == nil })
    }

    @Test func unknownSessionTokensAreCounted() throws {
        let broker = try BrokerProcess()
        for _ in 0..<3 {
            #expect(try broker.get("/token", headers: ["Authorization": "Bearer tbs_guess"]).status == 401)
        }
        let metrics = try broker.get("/metrics").text
        #expect(metrics.contains(#"broker_rejected_requests_total{route="/token",reason="unknown_session_token"} 3"#))
    }

    @Test func corsOnlyForConfiguredOrigins() throws {
        let broker = try BrokerProcess(config: "server:\n  cors_origins: https://app.example.com\n")
        let allowed = try broker.get("/healthz", headers: ["Origin": "https://app.example.com"])
        #expect(allowed.headers["access-control-allow-origin"] == "https://app.example.com")
        #expect(allowed.headers["vary"] == "Origin")
        let other = try broker.get("/healthz", headers: ["Origin": "https://evil.example"])
        #expect(other.headers["access-control-allow-origin"] == nil)
        let preflight = try RawHTTP.request(port: broker.port, method: "OPTIONS", target: "/token", headers: [
            "Origin": "https://app.example.com", "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization",
        ])
        #expect(preflight.status == 204)
        #expect(preflight.headers["access-control-allow-origin"] == "https://app.example.com")
        #expect(preflight.headers["access-control-allow-headers"]?.contains("Authorization") == true)
        #expect(preflight.headers["access-control-allow-headers"]?.contains("DPoP") == true, "a browser app's proofs (docs/dpop.md)")
        #expect(allowed.headers["access-control-expose-headers"]?.contains("DPoP-Nonce") == true)
        // The API proxy, as a browser app calls it: any method, conditional requests, and the
        // validators, links and rate limits of the API's answer.
        let proxied = try RawHTTP.request(port: broker.port, method: "OPTIONS", target: "/proxy/github/repos", headers: [
            "Origin": "https://app.example.com", "Access-Control-Request-Method": "PATCH",
            "Access-Control-Request-Headers": "authorization,if-match,traceparent",
        ])
        for method in ["PUT", "PATCH", "DELETE"] { #expect(proxied.headers["access-control-allow-methods"]?.contains(method) == true) }
        for header in ["If-Match", "traceparent", "Range"] { #expect(proxied.headers["access-control-allow-headers"]?.contains(header) == true) }
        for header in ["ETag", "Link", "X-RateLimit-Remaining"] { #expect(allowed.headers["access-control-expose-headers"]?.contains(header) == true) }
        let refused = try RawHTTP.request(port: broker.port, method: "OPTIONS", target: "/token", headers: [
            "Origin": "https://evil.example", "Access-Control-Request-Method": "GET",
        ])
        #expect(refused.status == 204)
        #expect(refused.headers["access-control-allow-origin"] == nil)
        #expect(refused.headers["access-control-allow-methods"] == nil)
    }

    /// The admin API on the public listener never answers CORS, whatever origins the API allows:
    /// no web page is its client.
    @Test func adminRoutesNeverAnswerCORS() throws {
        let tokenFile = FileManager.default.temporaryDirectory.appendingPathComponent("admin-\(UUID().uuidString)").path
        try String(repeating: "a", count: 40).write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let broker = try BrokerProcess(config: "server:\n  cors_origins: https://app.example.com\nadmin:\n  token_file: \(tokenFile)\n")
        let origin = ["Origin": "https://app.example.com"]
        #expect(try broker.get("/healthz", headers: origin).headers["access-control-allow-origin"] == "https://app.example.com")
        let listed = try broker.get("/admin/sessions", headers: origin.merging(["Authorization": "Bearer " + String(repeating: "a", count: 40)]) { $1 })
        #expect(listed.status == 200 && listed.headers["access-control-allow-origin"] == nil)
        let preflight = try RawHTTP.request(port: broker.port, method: "OPTIONS", target: "/admin/sessions", headers: [
            "Origin": "https://app.example.com", "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization",
        ])
        #expect(preflight.status == 204 && preflight.headers["access-control-allow-origin"] == nil
                && preflight.headers["access-control-allow-headers"] == nil)
    }

    @Test func everyAnswerForbidsFramingAndSniffing() throws {
        let broker = try BrokerProcess()
        for response in [try broker.get("/healthz"), try broker.get("/nope"), try broker.get("/callback?state=unknown", headers: ["Accept": "text/html"])] {
            #expect(response.headers["x-frame-options"] == "DENY")
            #expect(response.headers["x-content-type-options"] == "nosniff")
            #expect(response.headers["referrer-policy"] == "no-referrer")
            #expect(response.headers["content-security-policy"]?.contains("frame-ancestors 'none'") == true)
        }
    }
}
