import Foundation
import WireValues

/// `server.trusted_proxies`: the reverse proxies (addresses or CIDR ranges) whose
/// `X-Forwarded-For` names the client. Any address listed can claim to be any client, so the
/// list holds proxies only, and a range of every address (`0.0.0.0/0`, `::/0`) is refused; the
/// default, none, believes no header.
enum TrustedProxies {
    static func parse(_ text: String) -> Result<[IPNetwork], ConfigValueError> {
        var networks: [IPNetwork] = []
        for item in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            guard let network = IPNetwork(parsing: item) else {
                return .failure(ConfigValueError("\(ConfigValueParsing.quoted(item)) is not an IP address or a CIDR range like 10.0.0.0/8"))
            }
            guard !network.isEverything else {
                return .failure(ConfigValueError("\(ConfigValueParsing.quoted(item)) would let every client choose its own address; list your proxies"))
            }
            networks.append(network)
        }
        return .success(networks)
    }
}
