import WireValues

/// Classifies the hosts of listen addresses and URLs: whether a host is an IPv4 or IPv6 literal,
/// and whether it names this machine (loopback). The literals are parsed by ``IPNetwork``, the
/// parser the server uses for client addresses and trusted proxies, so the configuration and
/// the server agree on what an address is.
enum HostClassification {
    /// The 4 bytes of a dotted-quad IPv4 literal.
    static func ipv4(_ host: String) -> [UInt8]? {
        IPNetwork.addressBytes(host[...]).flatMap { $0.count == 4 ? $0 : nil }
    }

    /// The 16 bytes of an IPv6 literal written without brackets (no zone id).
    static func ipv6(_ host: String) -> [UInt8]? {
        IPNetwork.addressBytes(host[...]).flatMap { $0.count == 16 ? $0 : nil }
    }

    /// Whether `host` is an IPv4 or IPv6 literal (IPv6 without brackets).
    static func isIPLiteral(_ host: String) -> Bool {
        ipv4(host) != nil || ipv6(host) != nil
    }

    /// Whether `host` names this machine: `localhost`, 127.0.0.0/8 or ::1. Brackets around an
    /// IPv6 literal are allowed.
    static func isLoopback(_ host: String) -> Bool {
        var bare = host
        if bare.hasPrefix("["), bare.hasSuffix("]") { bare = String(bare.dropFirst().dropLast()) }
        if bare.lowercased() == "localhost" { return true }
        if let bytes = ipv4(bare) { return bytes[0] == 127 }
        if let bytes = ipv6(bare) { return bytes == [UInt8](repeating: 0, count: 15) + [1] }
        return false
    }
}
