import Foundation

/// The rules for URLs the broker talks to or publishes: provider endpoints, the issuer and the
/// broker's own public URL.
enum ConfigURLRules {
    /// Parses an absolute `https` URL with a host, no user information and no fragment.
    ///
    /// - Parameters:
    ///   - allowInsecureHTTP: accept plain `http` for any host; without it, `http` is accepted
    ///     only for loopback hosts (127.0.0.0/8, ::1, localhost).
    ///   - allowQuery: accept a query string (an issuer and the public URL have none).
    static func parse(_ text: String, allowInsecureHTTP: Bool, allowQuery: Bool = true) -> Result<URL, ConfigValueError> {
        func fail(_ message: String) -> Result<URL, ConfigValueError> { .failure(ConfigValueError(message)) }
        guard let components = URLComponents(string: text), let url = URL(string: text),
              let scheme = components.scheme else {
            return fail("expected an absolute URL such as https://login.example.com, got \(ConfigValueParsing.quoted(text))")
        }
        guard let host = components.host, !host.isEmpty else {
            return fail("must have a host, got \(ConfigValueParsing.quoted(text))")
        }
        switch scheme.lowercased() {
        case "https":
            break
        case "http":
            guard allowInsecureHTTP || HostClassification.isLoopback(host) else {
                return fail("plain http is only allowed for loopback hosts (127.0.0.1, [::1], localhost); "
                    + "use https or set allow_insecure_http: true")
            }
        default:
            return fail("the scheme must be https (or http for a loopback host), got \(scheme)")
        }
        if components.user != nil || components.password != nil {
            return fail("must not contain user information")
        }
        if components.fragment != nil || text.contains("#") {
            return fail("must not contain a fragment")
        }
        if !allowQuery, components.query != nil || text.contains("?") {
            return fail("must not contain a query")
        }
        return .success(url)
    }
}
