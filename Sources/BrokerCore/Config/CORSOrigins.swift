import Foundation

/// `server.cors_origins`: the browser origins that may call the API. Each is exactly
/// `scheme://host[:port]` (http or https, no path); a wildcard is refused — the API is
/// credentialed (bearer tokens), and a wildcard would let any site read answers. An origin is
/// kept as browsers send it (RFC 6454 §6.2): lowercase, without its scheme's default port —
/// `https://app.example.com:443` would otherwise match no browser's `Origin`.
enum CORSOrigins {
    static func parse(_ text: String) -> Result<[String], ConfigValueError> {
        var origins: [String] = []
        for item in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            guard item != "*" else {
                return .failure(ConfigValueError("a wildcard origin is not allowed; list each origin"))
            }
            guard let components = URLComponents(string: item), let scheme = components.scheme, ["http", "https"].contains(scheme),
                  let host = components.host, !host.isEmpty, components.path.isEmpty, components.query == nil,
                  components.fragment == nil, components.user == nil
            else {
                return .failure(ConfigValueError("\(ConfigValueParsing.quoted(item)) is not an origin like https://app.example.com"))
            }
            var origin = item.lowercased()
            let defaultPort = scheme.lowercased() == "https" ? ":443" : ":80"
            if components.port != nil, origin.hasSuffix(defaultPort) { origin.removeLast(defaultPort.count) }
            origins.append(origin)
        }
        return .success(origins)
    }
}
