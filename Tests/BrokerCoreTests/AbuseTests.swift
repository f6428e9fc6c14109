import HTTPServer
import Testing

@testable import BrokerCore

struct AbuseTests {
    @Test func rateLimiterAllowsABurstThenRefills() throws {
        let limiter = RateLimiter(perMinute: 3)
        for _ in 0..<3 { try limiter.admit("10.0.0.1", now: 100) }
        let refused = #expect(throws: HTTPError.self) { try limiter.admit("10.0.0.1", now: 100) }
        #expect(refused?.status == 429)
        #expect(refused?.code == "rate_limited")
        #expect(refused?.headers.first { $0.name == "Retry-After" }?.value == "20")
        try limiter.admit("10.0.0.2", now: 100) // another client has its own bucket
        try limiter.admit("10.0.0.1", now: 120) // one request regained after 20 s
        #expect(throws: HTTPError.self) { try limiter.admit("10.0.0.1", now: 121) }
    }

    @Test func zeroMeansNoLimit() throws {
        let limiter = RateLimiter(perMinute: 0)
        for _ in 0..<10_000 { try limiter.admit("10.0.0.1", now: 1) }
    }

    @Test func corsOriginsAreExplicit() throws {
        #expect(try CORSOrigins.parse("https://App.example.com, http://127.0.0.1:3000").get() == ["https://app.example.com", "http://127.0.0.1:3000"])
        #expect(throws: ConfigValueError.self) { try CORSOrigins.parse("*").get() }
        #expect(throws: ConfigValueError.self) { try CORSOrigins.parse("https://app.example.com/path").get() }
        #expect(throws: ConfigValueError.self) { try CORSOrigins.parse("ftp://files.example.com").get() }
        #expect(try CORSOrigins.parse("").get().isEmpty)
    }
}
