import Testing

@testable import HTTPServer

struct ConnectionLimiterTests {
    @Test func enforcesPerIPAndTotal() {
        let limiter = ConnectionLimiter(maxTotal: 3, maxPerIP: 2, refusalRoom: 64)
        #expect(limiter.open("10.0.0.1") == .admitted)
        #expect(limiter.open("10.0.0.1") == .admitted)
        #expect(limiter.open("10.0.0.1") == .refused)
        #expect(limiter.open("10.0.0.2") == .admitted)
        #expect(limiter.open("10.0.0.3") == .refused)
        limiter.close("10.0.0.1", admitted: true)
        #expect(limiter.open("10.0.0.3") == .admitted)
        #expect(limiter.open("10.0.0.1") == .refused)
    }

    /// A client holds at most as many refused connections as it may hold admitted ones: the next
    /// are closed at once, so that one client cannot fill libmicrohttpd's own limit with
    /// connections that are only ever refused. A refused one's close makes room again.
    @Test func aClientsRefusedConnectionsAreBounded() {
        let limiter = ConnectionLimiter(maxTotal: 100, maxPerIP: 2, refusalRoom: 64)
        #expect([limiter.open("10.0.0.1"), limiter.open("10.0.0.1")] == [.admitted, .admitted])
        #expect([limiter.open("10.0.0.1"), limiter.open("10.0.0.1")] == [.refused, .refused])
        #expect(limiter.open("10.0.0.1") == .closed)
        #expect(limiter.open("10.0.0.2") == .admitted, "another client is not held up")
        limiter.close("10.0.0.1", admitted: false)
        #expect(limiter.open("10.0.0.1") == .refused)
        limiter.close("10.0.0.1", admitted: true)
        #expect(limiter.open("10.0.0.1") == .admitted)
    }

    @Test func anIPv6ClientIsCountedByItsSlash64() {
        let limiter = ConnectionLimiter(maxTotal: 10, maxPerIP: 2, refusalRoom: 64)
        #expect(limiter.open("2001:db8:1:2::1") == .admitted)
        #expect(limiter.open("2001:db8:1:2:aaaa::2") == .admitted)
        #expect(limiter.open("2001:db8:1:2:ffff:ffff:ffff:ffff") == .refused, "the same /64")
        #expect(limiter.open("2001:db8:1:3::1") == .admitted, "another /64")
        #expect(limiter.open("10.0.0.1") == .admitted)
        #expect(limiter.open("10.0.0.2") == .admitted, "IPv4 addresses count one by one")
        limiter.close("2001:db8:1:2::1", admitted: true)
        #expect(limiter.open("2001:db8:1:2::7") == .admitted)
    }

    /// ... and at most a quarter of the room libmicrohttpd keeps for refusals: with the defaults a
    /// client may hold more connections than that room, and one client filling it would leave
    /// every other client past the total a silent close instead of a 503.
    @Test func aClientHoldsAtMostAQuarterOfTheRefusalRoom() {
        let limiter = ConnectionLimiter(maxTotal: 4, maxPerIP: 100, refusalRoom: 8)
        #expect((0..<4).map { _ in limiter.open("10.0.0.1") } == Array(repeating: .admitted, count: 4))
        #expect((0..<3).map { _ in limiter.open("10.0.0.1") } == [.refused, .refused, .closed])
        #expect([limiter.open("10.0.0.2"), limiter.open("10.0.0.2"), limiter.open("10.0.0.2")] == [.refused, .refused, .closed],
                "another client still gets its 503s")
        #expect(ConnectionLimiter(maxTotal: 4, maxPerIP: 100, refusalRoom: 2).open("10.0.0.1") == .admitted)
    }
}
