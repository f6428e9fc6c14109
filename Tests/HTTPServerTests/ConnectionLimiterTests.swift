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

    @Test func anIPv6ClientIsCountedByItsSlash64() {
        let limiter = ConnectionLimiter(maxTotal: 10, maxPerIP: 2)
        #expect(limiter.open("2001:db8:1:2::1"))
        #expect(limiter.open("2001:db8:1:2:aaaa::2"))
        #expect(!limiter.open("2001:db8:1:2:ffff:ffff:ffff:ffff"), "the same /64")
        #expect(limiter.open("2001:db8:1:3::1"), "another /64")
        #expect(limiter.open("10.0.0.1"))
        #expect(limiter.open("10.0.0.2"), "IPv4 addresses count one by one")
        limiter.close("2001:db8:1:2::1")
        #expect(limiter.open("2001:db8:1:2::7"))
    }
}
