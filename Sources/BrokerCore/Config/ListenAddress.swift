/// Where the broker accepts connections: an IP literal (or `localhost`) and a port.
///
/// Written `HOST:PORT`, with IPv6 hosts in brackets: `127.0.0.1:8080`, `0.0.0.0:80`,
/// `[::1]:8080`, `[::]:0`. Port 0 asks the system for any free port.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// The host without brackets: `127.0.0.1`, `::1`, `0.0.0.0` or `localhost`.
    public let host: String
    /// The TCP port; 0 means any free port.
    public let port: UInt16

    /// Creates an address from parts already known to be valid. Usable from inlinable code so
    /// that ``ServerConfig``'s default `listen` can be written as a default argument.
    @usableFromInline
    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`.
    ///
    /// - Throws: a `ConfigError` with one problem at key `listen` when the text is malformed, the
    ///   host is neither an IP literal nor `localhost`, or the port is outside 0...65535.
    public init(parsing text: String) throws(ConfigError) {
        switch Self.parse(text) {
        case .success(let address): self = address
        case .failure(let invalid): throw ConfigError(key: "listen", message: invalid.message)
        }
    }

    /// Whether the host only accepts connections from this machine (127.0.0.0/8, ::1, localhost).
    public var isLoopback: Bool { HostClassification.isLoopback(host) }

    /// Whether the host is an IPv6 literal, written in brackets in URLs and in `description`.
    public var isIPv6: Bool { HostClassification.ipv6(host) != nil }

    /// `HOST:PORT`, with an IPv6 host in brackets.
    public var description: String {
        isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Parses `HOST:PORT` into an address or a reason.
    static func parse(_ text: String) -> Result<ListenAddress, ConfigValueError> {
        let expected = "expected HOST:PORT such as 127.0.0.1:8080 or [::1]:8080"
        let host: String
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                return .failure(ConfigValueError("missing ] after the IPv6 address; \(expected)"))
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else {
                return .failure(ConfigValueError("missing :PORT after the address; \(expected)"))
            }
            portText = rest.dropFirst()
            guard HostClassification.ipv6(host) != nil else {
                return .failure(ConfigValueError("\(ConfigValueParsing.quoted(host)) is not an IPv6 address"))
            }
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                return .failure(ConfigValueError("missing :PORT; \(expected)"))
            }
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
            if host.contains(":") {
                return .failure(ConfigValueError("an IPv6 address must be written in brackets, as [::1]:8080"))
            }
            guard host == "localhost" || HostClassification.ipv4(host) != nil else {
                return .failure(ConfigValueError(
                    "host must be an IP address or localhost, got \(ConfigValueParsing.quoted(host))"))
            }
        }
        guard !portText.isEmpty, portText.allSatisfy(\.isASCII), portText.allSatisfy(\.isNumber),
              let port = Int(portText), port <= 65535 else {
            return .failure(ConfigValueError("port must be a number from 0 to 65535, got \(ConfigValueParsing.quoted(String(portText)))"))
        }
        return .success(ListenAddress(host: host, port: UInt16(port)))
    }
}
