import Testing

@testable import HTTPServer

struct ConnectionLimiterTests {
    @Test func enforcesPerIPAndTotal() {
        let limiter = ConnectionLimiter(maxTotal: 3, maxPerIP: 2)
        #expect(limiter.open("10.0.0.1"))
        #expect(limiter.open("10.0.0.1"))
        #expect(!limiter.open("10.0.0.1"))
        #expect(limiter.open("10.0.0.2"))
        #expect(!limiter.open("10.0.0.3"))
        limiter.close("10.0.0.1")
        #expect(limiter.open("10.0.0.3"))
        #expect(!limiter.open("10.0.0.1"))
    }
}
