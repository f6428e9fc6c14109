import Testing

@testable import WireValues

struct IPNetworkTests {
    @Test func parsesAddressesAndRanges() throws {
        #expect(try #require(IPNetwork(parsing: "10.0.0.0/8")).description == "10.0.0.0/8")
        #expect(try #require(IPNetwork(parsing: "10.1.2.3")).description == "10.1.2.3/32")
        #expect(try #require(IPNetwork(parsing: "192.168.7.9/20")).description == "192.168.0.0/20", "host bits are cleared")
        #expect(try #require(IPNetwork(parsing: "fd00::1/8")).description == "fd00::/8")
        #expect(try #require(IPNetwork(parsing: "::1")).description == "::1/128")
        #expect(try #require(IPNetwork(parsing: "0.0.0.0/0")).isEverything)
        #expect(try #require(IPNetwork(parsing: "::ffff:10.0.0.0/104")).description == "10.0.0.0/8", "IPv4-mapped: the IPv4 range")
    }

    @Test(arguments: ["", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/8/8", "10.0.0", "010.0.0.1",
                      "example.com", "10.0.0.0 /8", "[::1]", "10.0.0.1:80", "fe80::1%eth0", "10.0.0.0/+8", "10.0.0.0/0008"])
    func refusesWhatIsNotOne(_ text: String) {
        #expect(IPNetwork(parsing: text) == nil)
    }

    @Test func containsItsAddressesOnly() throws {
        let network = try #require(IPNetwork(parsing: "10.20.0.0/14"))
        #expect(network.contains(try #require(IPNetwork.addressBytes("10.23.255.255"))))
        #expect(!network.contains(try #require(IPNetwork.addressBytes("10.24.0.0"))))
        #expect(!network.contains(try #require(IPNetwork.addressBytes("::1"))), "another family")
        #expect(network.contains(try #require(IPNetwork.addressBytes("::ffff:10.20.1.1"))), "IPv4-mapped IPv6")
        let mapped = try #require(IPNetwork(parsing: "::ffff:10.0.0.5"))
        #expect(mapped.contains(try #require(IPNetwork.addressBytes("10.0.0.5"))))
        #expect(mapped.contains(try #require(IPNetwork.addressBytes("::ffff:10.0.0.5"))))
        let six = try #require(IPNetwork(parsing: "2001:db8::/32"))
        #expect(six.contains(try #require(IPNetwork.addressBytes("2001:db8:ffff::1"))))
        #expect(!six.contains(try #require(IPNetwork.addressBytes("2001:db9::1"))))
    }
}
