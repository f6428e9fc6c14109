import Foundation

/// A redirect URI registered for an app, checked against RFC 8252 (OAuth 2.0 for native apps).
///
/// Three kinds are accepted:
/// - a private-use (custom) scheme: `myapp://oauth`, `com.example.app:/oauth2redirect`;
/// - a claimed `https` URI with a host: `https://app.example.com/cb`;
/// - a loopback `http` URI on the IP literal `127.0.0.1` or `[::1]`:
///   `http://127.0.0.1/callback`, whose port is ignored when matching (RFC 8252 §7.3).
///
/// None may carry a fragment, and `javascript:`, `data:`, `file:` and similar schemes are refused.
public struct RedirectURI: Sendable, Hashable, CustomStringConvertible {
    /// The kinds of redirect URI that RFC 8252 allows.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// A private-use URI scheme such as `myapp://oauth` (RFC 8252 §7.1).
        case customScheme
        /// A claimed `https` URI (RFC 8252 §7.2).
        case https
        /// A loopback `http` URI on `127.0.0.1` or `[::1]`, any port (RFC 8252 §7.3).
        case loopback
    }

    /// The URI exactly as registered.
    public let raw: String
    /// Which of the allowed kinds it is.
    public let kind: Kind

    /// Parses and checks a redirect URI.
    ///
    /// - Throws: a `ConfigError` with one problem at key `redirect_uri` saying which rule failed.
    public init(parsing text: String) throws(ConfigError) {
        switch Self.parse(text) {
        case .success(let uri): self = uri
        case .failure(let invalid): throw ConfigError(key: "redirect_uri", message: invalid.message)
        }
    }

    private init(raw: String, kind: Kind) {
        self.raw = raw
        self.kind = kind
    }

    /// The URI as registered.
    public var description: String { raw }

    /// Whether `candidate` is this registered URI: exactly the same string, except that a loopback
    /// URI matches on any port (scheme, host, path and query must still be identical).
    public func matches(_ candidate: String) -> Bool {
        guard kind == .loopback else { return candidate == raw }
        guard let candidateKey = Self.loopbackKey(candidate) else { return false }
        return candidateKey == Self.loopbackKey(raw)
    }

    /// Parses `text` into a redirect URI or the rule it breaks.
    static func parse(_ text: String) -> Result<RedirectURI, ConfigValueError> {
        func fail(_ message: String) -> Result<RedirectURI, ConfigValueError> { .failure(ConfigValueError(message)) }
        guard !text.isEmpty else { return fail("must not be empty") }
        guard text.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value != 0x7F }) else {
            return fail("must be ASCII without spaces or control characters (percent-encode them)")
        }
        guard !text.contains("#") else { return fail("must not contain a fragment (RFC 6749 §3.1.2)") }
        guard let colon = text.firstIndex(of: ":"), Self.isScheme(text[..<colon]) else {
            return fail("is not an absolute URI: it has no scheme (expected e.g. myapp://oauth or https://app.example.com/cb)")
        }
        let scheme = String(text[..<colon])
        guard scheme == scheme.lowercased() else {
            return fail("the scheme must be lower case, since redirect URIs are compared exactly")
        }
        if Self.refusedSchemes.contains(scheme) {
            return fail("the scheme \(scheme): is not allowed for a redirect URI")
        }
        guard let components = URLComponents(string: text) else { return fail("is not a valid URI") }
        if components.user != nil || components.password != nil {
            return fail("must not contain user information")
        }
        switch scheme {
        case "https":
            guard let host = components.host, !host.isEmpty, text.hasPrefix("https://") else {
                return fail("an https redirect URI must have a host")
            }
            return .success(RedirectURI(raw: text, kind: .https))
        case "http":
            return parseLoopback(text, components: components)
        default:
            guard text.index(after: colon) < text.endIndex else {
                return fail("a custom-scheme redirect URI needs something after \(scheme):")
            }
            return .success(RedirectURI(raw: text, kind: .customScheme))
        }
    }

    private static let refusedSchemes: Set<String> = [
        "javascript", "data", "file", "vbscript", "blob", "about", "filesystem",
    ]

    private static func isScheme(_ text: Substring) -> Bool {
        guard let first = text.unicodeScalars.first, first.properties.isAlphabetic, first.isASCII else { return false }
        return text.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "+.-".unicodeScalars.contains($0))
        }
    }

    private static func parseLoopback(_ text: String, components: URLComponents) -> Result<RedirectURI, ConfigValueError> {
        guard text.hasPrefix("http://"), let host = components.host, !host.isEmpty else {
            return .failure(ConfigValueError("an http redirect URI must have a host"))
        }
        if host.lowercased() == "localhost" {
            return .failure(ConfigValueError("http://localhost is not allowed; use http://127.0.0.1 "
                + "(RFC 8252 §8.3: loopback redirects use the IP literal, not localhost)"))
        }
        guard loopbackKey(text) != nil else {
            return .failure(ConfigValueError("plain http is only allowed for the loopback addresses 127.0.0.1 "
                + "and [::1] (RFC 8252 §7.3); use https or a custom scheme"))
        }
        return .success(RedirectURI(raw: text, kind: .loopback))
    }

    /// For `http://127.0.0.1[:PORT]REST` or `http://[::1][:PORT]REST`, the text without the port;
    /// `nil` for anything else.
    static func loopbackKey(_ text: String) -> String? {
        for prefix in ["http://127.0.0.1", "http://[::1]"] where text.hasPrefix(prefix) {
            var rest = text.dropFirst(prefix.count)
            if rest.first == ":" {
                let digits = rest.dropFirst().prefix { $0.isASCII && $0.isNumber }
                guard !digits.isEmpty, digits.count <= 5, let port = Int(digits), port <= 65535 else { return nil }
                rest = rest.dropFirst(1 + digits.count)
            }
            guard rest.isEmpty || rest.first == "/" || rest.first == "?" else { return nil }
            return prefix + rest
        }
        return nil
    }
}
