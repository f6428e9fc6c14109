import WireValues

/// The client's address behind trusted reverse proxies, from `X-Forwarded-For`.
///
/// Each proxy appends the address it received the request from, so the list reads left to
/// right from the client to the last proxy, and only its right end can be believed: anything
/// to the left of the first address no trusted proxy vouches for may be the client's own
/// invention. So the list is read from the right, past every trusted proxy, and the first
/// other address is the client. When the connection itself does not come from a trusted proxy,
/// the header is ignored.
enum ForwardedFor {
    /// The client address for a request from `peer` whose `X-Forwarded-For` values, joined by
    /// commas, `header` reads (asked only when the peer is trusted; nil: none), and the proxy's
    /// (the peer's) when the client came from the header. Addresses are in their one spelling
    /// (an IPv4-mapped IPv6 address as IPv4), so that one client is one key for the rate limits
    /// whichever way it came.
    static func addresses(peer: String, trusted: [IPNetwork], header: () -> String?) -> (client: String, proxy: String?) {
        guard let peerAddress = IPNetwork.addressBytes(peer[...]).map(IPNetwork.unmapped) else { return (peer, nil) }
        let proxy = IPNetwork.text(of: peerAddress)
        guard IPNetwork.any(trusted, contains: peerAddress), let header = header() else { return (proxy, nil) }
        var client: String?
        for entry in header.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).reversed() {
            let text = Substring(entry).trimmingSpaces
            // Something no proxy writes: whoever sent it is not to be believed further left.
            guard let address = IPNetwork.addressBytes(text).map(IPNetwork.unmapped) else { break }
            client = IPNetwork.text(of: address)
            if !IPNetwork.any(trusted, contains: address) { break }
        }
        return client.map { ($0, proxy) } ?? (proxy, nil)
    }
}
