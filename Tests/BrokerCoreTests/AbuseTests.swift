import HTTPServer
import Testing
import WireValues

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

    @Test func requestsLetThroughTogetherAreEachChargedAndOweTheirWay() throws {
        // A limit that counts outcomes: ten guesses looked at the bucket while it had room, and
        // all ten were refused; each is paid for, so the client waits them all out.
        let limiter = RateLimiter(perMinute: 3)
        for _ in 0..<10 { #expect(limiter.wait("10.0.0.1", now: 100) == nil) }
        for _ in 0..<10 { limiter.charge("10.0.0.1", now: 100) }
        let wait = try #require(limiter.wait("10.0.0.1", now: 100))
        #expect(abs(wait - 80) < 0.001, "from -3 (a minute's worth owed at most) back to 1: \(wait)")
        #expect(limiter.wait("10.0.0.1", now: 178) != nil)
        #expect(limiter.wait("10.0.0.1", now: 182) == nil)
        #expect(limiter.wait("10.0.0.2", now: 100) == nil, "another client has its own bucket")
    }

    @Test func aBurstOfWrongUserCodesFromOneNetworkLocksOutThatNetworkNotEveryone() {
        // 120 wrong codes from 12 addresses of one /24, all looked at before any was counted
        // (sent together), then counted.
        let guarded = UserCodeGuard(missesPerMinute: 60)
        let addresses = (1...12).map { "198.51.100.\($0)" }
        for address in addresses { #expect(guarded.admit(address, now: 100) == .now) }
        for address in addresses { for _ in 0..<10 { guarded.miss(address, now: 100) } }
        #expect(guarded.admit("203.0.113.7", now: 102) == .now, "a person elsewhere enters a code two seconds later")
        #expect(guarded.admit("198.51.100.200", now: 130).isRefused, "the network's share owes: its other addresses wait too")
        #expect(guarded.admit("198.51.100.1", now: 130).isRefused, "each sending address owes its own share")
    }

    /// About twenty addresses in ten networks spend the budget for everyone: those networks
    /// wait for it, while a person on a network that sent no wrong code still gets in, slowly —
    /// and once their network sends a wrong code, it waits like the others.
    @Test func aSpentBudgetForEveryoneSlowsUntouchedNetworksRatherThanRefusingThem() {
        let guarded = UserCodeGuard(missesPerMinute: 60)
        let guessers = (1...10).flatMap { network in ["10.\(network).0.1", "10.\(network).0.2"] }
        for guesser in guessers { for _ in 0..<3 { guarded.miss(guesser, now: 100) } }
        #expect(guarded.admit("10.1.0.3", now: 100).isRefused, "a network that spent the budget waits for it")
        #expect(guarded.admit("203.0.113.7", now: 100) == .slowed(UserCodeGuard.slowdownSeconds), "an untouched network gets in, slowly")
        #expect(guarded.admit("2001:db8:aa::1", now: 100) == .slowed(UserCodeGuard.slowdownSeconds))
        guarded.miss("203.0.113.7", now: 100)
        #expect(guarded.admit("203.0.113.99", now: 100).isRefused, "after its wrong code, that network waits like the others")
        #expect(guarded.admit("10.1.0.3", now: 200) == .now, "the budget refills")
    }

    @Test func anIPv6ClientStartsSignInsByItsSites56() throws {
        let limiter = RateLimiter(perMinute: 2, key: ClientKey.site)
        try limiter.admit("2001:db8:1:200::1", now: 100)
        try limiter.admit("2001:db8:1:2ff:ffff::2", now: 100)
        #expect(throws: HTTPError.self, "another /64 of the same /56") { try limiter.admit("2001:db8:1:2aa::4", now: 100) }
        try limiter.admit("2001:db8:1:300::1", now: 100) // the next /56
        try limiter.admit("10.0.0.2", now: 100)
        try limiter.admit("10.0.0.3", now: 100) // IPv4 addresses count one by one
        #expect(ClientKey.site(of: "2001:db8:1:2ab:1::1") == "2001:db8:1:200::/56")
        #expect(ClientKey.site(of: "::ffff:10.1.2.3") == "10.1.2.3")
    }

    @Test func anIPv6ClientIsLimitedByItsSlash64() throws {
        let limiter = RateLimiter(perMinute: 2)
        try limiter.admit("2001:db8:1:2::1", now: 100)
        try limiter.admit("2001:db8:1:2:ffff::2", now: 100)
        #expect(throws: HTTPError.self, "the same /64") { try limiter.admit("2001:db8:1:2:1:2:3:4", now: 100) }
        try limiter.admit("2001:db8:1:3::1", now: 100) // the next /64
        try limiter.admit("::ffff:10.0.0.1", now: 100)
        try limiter.admit("10.0.0.2", now: 100) // IPv4 addresses count one by one
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
        // As browsers send them: a scheme's default port is not written in an Origin.
        #expect(try CORSOrigins.parse("https://app.example.com:443, http://[::1]:80, http://x.example:443, https://y.example:8443").get()
            == ["https://app.example.com", "http://[::1]", "http://x.example:443", "https://y.example:8443"])
    }

    @Test func trustedProxiesAreAddressesOrRanges() throws {
        let config = try ConfigLoader.load(path: nil, environment: ["BROKER_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7,fd00::/8"])
        #expect(config.server.trustedProxies.map(\.description) == ["10.0.0.0/8", "192.168.1.7/32", "fd00::/8"])
        #expect(try ConfigLoader.load(path: nil, environment: [:]).server.trustedProxies.isEmpty, "none by default")
        let problem = try #require(throws: ConfigError.self) {
            try ConfigLoader.load(path: nil, environment: ["BROKER_TRUSTED_PROXIES": "10.0.0.0/8, proxy.internal"])
        }
        #expect(problem.description.contains("BROKER_TRUSTED_PROXIES"))
        #expect(problem.description.contains("\"proxy.internal\" is not an IP address or a CIDR range"))
        for everything in ["0.0.0.0/0", "::/0"] {
            #expect(throws: ConfigValueError.self) { try TrustedProxies.parse("10.0.0.0/8, \(everything)").get() }
        }
    }
}

private extension UserCodeGuard.Admission {
    var isRefused: Bool {
        if case .refused = self { true } else { false }
    }
}
