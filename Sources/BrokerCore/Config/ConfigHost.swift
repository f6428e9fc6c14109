#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Classifies host names found in listen addresses and URLs.
enum ConfigHost {
    /// The 4 bytes of a dotted-quad IPv4 literal.
    static func ipv4(_ host: String) -> [UInt8]? {
        var address = in_addr()
        guard inet_pton(AF_INET, host, &address) == 1 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    /// The 16 bytes of an IPv6 literal written without brackets (no zone id).
    static func ipv6(_ host: String) -> [UInt8]? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, host, &address) == 1 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
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
