import Testing
import WireValues

@testable import HTTPServer

struct ForwardedForTests {
    private let proxies = ["10.0.0.0/8", "fd00::/8"].compactMap { IPNetwork(parsing: $0) }

    private func client(_ peer: String, _ header: String?) -> String {
        ForwardedFor.addresses(peer: peer, trusted: proxies) { header }.client
    }

    @Test func theConnectionIsTheClientWithoutATrustedProxy() {
        #expect(client("203.0.113.5", "198.51.100.1") == "203.0.113.5", "an untrusted peer's header is ignored")
        #expect(client("10.0.0.2", nil) == "10.0.0.2", "a proxy's own request")
        #expect(ForwardedFor.addresses(peer: "10.0.0.2", trusted: []) { "198.51.100.1" }.client == "10.0.0.2")
    }

    @Test func theHeaderIsReadOnlyFromATrustedProxy() {
        var read = false
        _ = ForwardedFor.addresses(peer: "203.0.113.5", trusted: proxies) { read = true; return "198.51.100.1" }
        #expect(!read)
    }

    @Test func theProxyIsNamedWhenTheClientCameFromTheHeader() {
        #expect(ForwardedFor.addresses(peer: "::ffff:10.0.0.2", trusted: proxies) { "198.51.100.1" } == ("198.51.100.1", "10.0.0.2"))
        #expect(ForwardedFor.addresses(peer: "::ffff:10.0.0.2", trusted: proxies) { nil } == ("10.0.0.2", nil))
        #expect(ForwardedFor.addresses(peer: "10.0.0.2", trusted: proxies) { "garbage" } == ("10.0.0.2", nil))
        #expect(ForwardedFor.addresses(peer: "203.0.113.5", trusted: proxies) { "198.51.100.1" } == ("203.0.113.5", nil))
    }

    @Test func theRightMostAddressNoTrustedProxyVouchesForIsTheClient() {
        #expect(client("10.0.0.2", "198.51.100.1") == "198.51.100.1")
        #expect(client("10.0.0.2", "1.2.3.4, 198.51.100.1") == "198.51.100.1", "what the client wrote itself is not believed")
        #expect(client("10.0.0.2", "1.2.3.4, 198.51.100.1, 10.9.9.9") == "198.51.100.1", "past a chain of trusted proxies")
        #expect(client("10.0.0.2", " 198.51.100.1 ,\t10.9.9.9 ") == "198.51.100.1", "optional whitespace")
        #expect(client("fd00::2", "2001:db8::7") == "2001:db8::7")
        #expect(client("::ffff:10.0.0.2", "198.51.100.1") == "198.51.100.1", "a dual-stack socket's IPv4 proxy")
    }

    @Test func oneSpellingPerAddress() {
        #expect(client("10.0.0.2", "2001:DB8:0:0:0:0:0:7") == "2001:db8::7")
        #expect(client("10.0.0.2", "::ffff:198.51.100.1") == "198.51.100.1")
        #expect(client("::ffff:203.0.113.5", "198.51.100.1") == "203.0.113.5", "a dual-stack socket's direct client")
    }

    @Test func garbageStopsTheWalk() {
        #expect(client("10.0.0.2", "not-an-address") == "10.0.0.2", "the proxy that passed it on is the client")
        #expect(client("10.0.0.2", "198.51.100.1, unknown, 10.9.9.9") == "10.9.9.9")
        #expect(client("10.0.0.2", "198.51.100.1:4711") == "10.0.0.2", "no ports")
        #expect(client("10.0.0.2", "") == "10.0.0.2")
        #expect(client("10.0.0.2", "198.51.100.1,,10.9.9.9") == "10.9.9.9", "an empty entry")
        #expect(client("10.0.0.2", "10.1.1.1, 10.9.9.9") == "10.1.1.1", "all trusted: the furthest one")
    }
}
