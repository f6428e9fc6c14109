import Foundation

/// `server.cors_origins`: the browser origins that may call the API. Each is exactly
/// `scheme://host[:port]` (http or https, no path); a wildcard is refused — the API is
/// credentialed (bearer tokens), and a wildcard would let any site read answers.
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
            origins.append(item.lowercased())
        }
        return .success(origins)
    }
}
