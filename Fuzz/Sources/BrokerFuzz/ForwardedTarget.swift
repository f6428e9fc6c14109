// Client addresses behind trusted proxies: WireValues.IPNetwork(parsing:) (server.trusted_proxies
// entries) and HTTPServer.ForwardedFor.client (X-Forwarded-For from the network).
//
// Input: the connection's address, a newline, then the X-Forwarded-For value. Trusted proxies
// are fixed: 10.0.0.0/8, fd00::/8 and 127.0.0.1. Every comma-separated piece of the input is
// also parsed as a trusted_proxies entry.
//
// Invariants beyond "no crash", checked against the header itself rather than the code's walk:
// from an untrusted connection (or without the header) the client is the connection's address;
// otherwise it is the connection's address when the right-most entry is not an address, or else
// an entry every entry to whose right is a trusted address, and which is either untrusted or
// the left end of the addresses. The client is in its one spelling; a proxy, when named, is the
// connection's address. A parsed entry prints as a range that parses to itself.
@testable import HTTPServer
@testable import WireValues

private let trusted = ["10.0.0.0/8", "fd00::/8", "127.0.0.1"].compactMap { IPNetwork(parsing: $0) }

private func spelled(_ text: Substring) -> String? {
    IPNetwork.addressBytes(text).map { IPNetwork.text(of: IPNetwork.unmapped($0)) }
}

private func isTrusted(_ text: Substring) -> Bool {
    IPNetwork.addressBytes(text).map { IPNetwork.any(trusted, contains: $0) } ?? false
}

/// The header's comma-separated entries without their spaces and tabs, split by byte.
private func entries(of header: String) -> [Substring] {
    header.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).map { entry in
        var entry = entry
        while let first = entry.first, first == 0x20 || first == 0x09 { entry = entry.dropFirst() }
        while let last = entry.last, last == 0x20 || last == 0x09 { entry = entry.dropLast() }
        return Substring(entry)
    }
}

let forwardedTarget = FuzzTarget(name: "forwarded", run: { bytes in
    let text = String(decoding: bytes, as: UTF8.self)
    for piece in text.split(separator: ",") {
        guard let network = IPNetwork(parsing: String(piece)) else { continue }
        invariant(IPNetwork(parsing: network.description) == network, "\(network) does not parse to itself")
    }
    let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
    let peer = String(parts[0])
    let header = parts.count > 1 ? String(parts[1]) : nil
    let (client, proxy) = ForwardedFor.addresses(peer: peer, trusted: trusted) { header }
    let peerSpelled = spelled(peer[...]) ?? peer
    invariant(proxy == nil || (proxy == peerSpelled && header != nil), "the proxy \(proxy ?? "") is not the connection")
    guard let header, isTrusted(peer[...]) else {
        invariant(client == peerSpelled, "an untrusted connection's X-Forwarded-For was believed")
        return
    }
    let list = entries(of: header)
    guard spelled(list[list.count - 1]) != nil else {
        invariant(client == peerSpelled, "the client \(client) came from a header whose right end is not an address")
        return
    }
    let chosen = list.indices.last { index in
        spelled(list[index]) == client && list[(index + 1)...].allSatisfy(isTrusted)
            && (!isTrusted(list[index]) || index == 0 || spelled(list[index - 1]) == nil)
    }
    invariant(chosen != nil, "the client \(client) is not the entry the header's right end leads to")
}, seeds: {
    textSeeds("forwarded", [
        "10.0.0.2\n198.51.100.1",
        "10.0.0.2\n1.2.3.4, 198.51.100.1, 10.9.9.9",
        "203.0.113.5\n198.51.100.1",
        "127.0.0.1\n2001:db8::7, fd00::1",
        "::ffff:10.0.0.2\n::ffff:198.51.100.1",
        "fd00::2\n198.51.100.1:4711, unknown,,\t10.1.1.1 ",
        "10.0.0.0/8,192.168.7.9/20,fd00::1/8,::/0,10.0.0.0/33",
    ])
})
