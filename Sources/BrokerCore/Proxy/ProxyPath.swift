/// The API proxy's target: the provider's configured API base URL joined with the path the
/// client sent after `/proxy/{provider}` and its query string, both as sent (never decoded and
/// re-encoded). Everything in the path that could move the request elsewhere is refused before
/// any connection: dot segments (`.`, `..`), empty segments, backslashes, `@`, percent-encoded
/// slashes, backslashes, dots, `@`, `%` (double encoding) or control characters, raw control,
/// space or non-ASCII characters, and a path that does not start with `/`; the query may hold
/// any visible character but `#`. The host is always the base URL's.
enum ProxyPath {
    /// Why a path or query was refused (said to the client, without repeating it).
    struct Refusal: Error, Sendable, Equatable {
        let reason: String
    }

    /// The upstream URL for `path` (what follows `/proxy/{provider}`) and `query`.
    static func target(base: String, path: Substring, query: Substring?) -> Result<String, Refusal> {
        guard path.isEmpty || path.hasPrefix("/") else { return .failure(Refusal(reason: "The API path must start with /.")) }
        if let refusal = checkPath(path) { return .failure(refusal) }
        for segment in path.split(separator: "/", omittingEmptySubsequences: false).dropFirst() {
            if segment == "." || segment == ".." { return .failure(Refusal(reason: "The API path may not contain . or .. segments.")) }
        }
        if path.contains("//") { return .failure(Refusal(reason: "The API path may not contain empty segments.")) }
        if let query, !query.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "#") }) {
            return .failure(Refusal(reason: "The query contains a character the proxy does not forward (#, a space, a control or non-ASCII character): percent-encode it."))
        }
        let trimmed = base.hasSuffix("/") ? String(base.dropLast()) : base
        var url = trimmed + (path.isEmpty ? "/" : String(path))
        if let query { url += "?" + query }
        return .success(url)
    }

    /// RFC 3986 `pchar` and `/`, less `@`, with percent-encodings that do not decode to a
    /// separator, a dot, `@`, `%` or a control character.
    private static func checkPath(_ text: Substring) -> Refusal? {
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2]) else {
                    return Refusal(reason: "The API path has a malformed percent-encoding.")
                }
                let decoded = high << 4 | low
                if decoded < 0x20 || decoded == 0x7F || "/\\.@%".utf8.contains(decoded) {
                    return Refusal(reason: "The API path encodes a character the proxy does not forward (/, \\, ., @, % or a control character).")
                }
                index += 3
                continue
            }
            let allowed = (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                || "-._~!$&'()*+,;=:/".utf8.contains(byte)
            guard allowed else {
                return Refusal(reason: "The API path contains a character the proxy does not forward (\\, @, a space, a control or non-ASCII character).")
            }
            index += 1
        }
        return nil
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
