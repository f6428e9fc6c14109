#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address range in CIDR notation (`10.0.0.0/8`, `fd00::/8`), or one address
/// (`10.1.2.3`, a /32 or /128): the reverse proxies the server believes about client addresses.
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    /// The network's address: 4 bytes (IPv4) or 16 (IPv6), host bits cleared.
    let address: [UInt8]
    let prefixLength: Int

    /// Parses `address` or `address/prefix`; nil when it is neither. An IPv4-mapped IPv6 range
    /// (`::ffff:10.0.0.0/104`) is its IPv4 range, as `contains` compares such addresses.
    public init?(parsing text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard var address = Self.addressBytes(parts[0]) else { return nil }
        var prefixLength = address.count * 8
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].utf8.count <= 3, parts[1].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let length = Int(parts[1]), length <= prefixLength else { return nil }
            prefixLength = length
        }
        if address.count == 16, prefixLength >= 96, Self.unmapped(address).count == 4 {
            address = Self.unmapped(address)
            prefixLength -= 96
        }
        self.address = Self.masked(address, to: prefixLength)
        self.prefixLength = prefixLength
    }

    /// Whether this range holds every address of its family (`0.0.0.0/0`, `::/0`).
    public var isEverything: Bool { prefixLength == 0 }

    public var description: String {
        "\(Self.text(of: address))/\(prefixLength)"
    }

    /// Whether `address` (bytes from `addressBytes`) is in this range. An IPv4-mapped IPv6
    /// address (`::ffff:10.1.2.3`, how a dual-stack socket sees IPv4 clients) counts as its
    /// IPv4 address.
    package func contains(_ address: [UInt8]) -> Bool {
        let address = Self.unmapped(address)
        guard address.count == self.address.count else { return false }
        return Self.masked(address, to: prefixLength) == self.address
    }

    /// Whether any of `networks` contains `address`.
    package static func any(_ networks: [IPNetwork], contains address: [UInt8]) -> Bool {
        networks.contains { $0.contains(address) }
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 literal (no brackets, no port, no zone); nil when
    /// `text` is not one.
    public static func addressBytes(_ text: Substring) -> [UInt8]? {
        guard !text.isEmpty, text.utf8.count < 46 else { return nil } // INET6_ADDRSTRLEN
        return String(text).withCString { literal in
            var bytes = [UInt8](repeating: 0, count: 16)
            if text.utf8.contains(UInt8(ascii: ":")) {
                return inet_pton(AF_INET6, literal, &bytes) == 1 ? bytes : nil
            }
            return inet_pton(AF_INET, literal, &bytes) == 1 ? Array(bytes[0..<4]) : nil
        }
    }

    /// An IPv4-mapped IPv6 address as its IPv4 address; any other as it is.
    package static func unmapped(_ address: [UInt8]) -> [UInt8] {
        guard address.count == 16, address[0..<10].allSatisfy({ $0 == 0 }), address[10] == 0xFF, address[11] == 0xFF else {
            return address
        }
        return Array(address[12..<16])
    }

    private static func masked(_ address: [UInt8], to prefixLength: Int) -> [UInt8] {
        address.enumerated().map { index, byte in
            let kept = min(8, max(0, prefixLength - index * 8))
            return kept == 8 ? byte : byte & ~(0xFF >> UInt8(kept))
        }
    }

    /// The usual text of an address (`inet_ntop`): one spelling per address.
    package static func text(of address: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: 46)
        _ = address.withUnsafeBytes { bytes in
            inet_ntop(address.count == 4 ? AF_INET : AF_INET6, bytes.baseAddress, &buffer, socklen_t(buffer.count))
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
