/// What per-client limits count a client by: an IPv4 address as it is, an IPv6 address by its
/// /64. One host commonly holds a whole /64 (SLAAC privacy addresses, RFC 8981; a /64 per
/// subscriber, RFC 6177) and can pick a new address in it for every request, so counting IPv6
/// addresses one by one would let it step around every limit. An IPv4-mapped IPv6 address
/// (`::ffff:10.1.2.3`) is its IPv4 address.
public enum ClientKey {
    /// The key of `address`, an IP literal as the server reports clients; text that is not one
    /// is its own key.
    public static func of(_ address: String) -> String {
        // IPv4 (the common case, and "unknown"): as it is, without parsing.
        guard address.utf8.contains(UInt8(ascii: ":")), let bytes = IPNetwork.addressBytes(Substring(address)) else {
            return address
        }
        let unmapped = IPNetwork.unmapped(bytes)
        guard unmapped.count == 16 else { return IPNetwork.text(of: unmapped) }
        return IPNetwork.text(of: Array(unmapped[0..<8]) + [UInt8](repeating: 0, count: 8)) + "/64"
    }

    /// What limits on creating state count a client by (sign-ins started, device codes issued):
    /// an IPv4 address as it is, an IPv6 address by its /56 — the prefix one home or small site
    /// is commonly delegated (RFC 6177), every /64 of which is as cheap to it as one address.
    public static func site(of address: String) -> String {
        guard address.utf8.contains(UInt8(ascii: ":")), let bytes = IPNetwork.addressBytes(Substring(address)) else {
            return address
        }
        let unmapped = IPNetwork.unmapped(bytes)
        guard unmapped.count == 16 else { return IPNetwork.text(of: unmapped) }
        return IPNetwork.text(of: Array(unmapped[0..<7]) + [UInt8](repeating: 0, count: 9)) + "/56"
    }

    /// The network of `address` a group of clients commonly shares (one subscriber, one
    /// organisation): an IPv4 address's /24, an IPv6 address's /48 (RFC 6177's usual site
    /// prefix). For limits that one small group of clients must not spend for everyone.
    public static func network(of address: String) -> String {
        guard let bytes = IPNetwork.addressBytes(Substring(address)) else { return address }
        let unmapped = IPNetwork.unmapped(bytes)
        if unmapped.count == 4 { return IPNetwork.text(of: Array(unmapped[0..<3]) + [0]) + "/24" }
        return IPNetwork.text(of: Array(unmapped[0..<6]) + [UInt8](repeating: 0, count: 10)) + "/48"
    }
}
