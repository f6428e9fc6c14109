import Foundation

/// The API proxy's target: the provider's configured API base URL joined with the path the
/// client sent after `/proxy/{provider}` and its query string, both as sent (never decoded and
/// re-encoded). Everything in the path that could move the request elsewhere is refused before
/// any connection: dot segments (`.`, `..`), empty segments, backslashes, `@`, percent-encoded
/// slashes, backslashes, dots, `@`, `%` (double encoding) or control characters, raw control,
/// space or non-ASCII characters, and a path that does not start with `/`; the query may hold
/// any visible character but `#`. Also what some API servers read as a dot segment: a segment
/// that is dots (or nothing) before a `;` (Tomcat, Jetty and Spring drop path parameters, so
/// `..;` is `..` to them), percent-encoded bytes that are not UTF-8 (an overlong `%c0%ae` is a
/// dot to a lenient decoder), and encoded characters that look like or normalise to a dot, a
/// slash, a backslash, `@` or `%` (fullwidth `%ef%bc%8e`, U+2024, U+FE52…). The host is always
/// the base URL's.
enum ProxyPath {
    /// Why a path or query was refused (said to the client, without repeating it).
    struct Refusal: Error, Sendable, Equatable {
        let reason: String
    }

    /// The upstream URL for `path` (what follows `/proxy/{provider}`) and `query`.
    static func target(base: String, path: Substring, query: Substring?) -> Result<String, Refusal> {
        guard path.isEmpty || path.hasPrefix("/") else { return .failure(Refusal(reason: "The API path must start with /.")) }
        if let refusal = checkPath(path) { return .failure(refusal) }
        if let refusal = checkSegments(path) { return .failure(refusal) }
        if hasEmptySegment(path) { return .failure(Refusal(reason: "The API path may not contain empty segments.")) }
        if let query, !query.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "#") }) {
            return .failure(Refusal(reason: "The query contains a character the proxy does not forward (#, a space, a control or non-ASCII character): percent-encode it."))
        }
        // One allocation for the URL: it is made for every proxied request.
        var url = ""
        url.reserveCapacity(base.utf8.count + path.utf8.count + (query.map { $0.utf8.count + 1 } ?? 0) + 1)
        url += base.hasSuffix("/") ? base.dropLast() : base[...]
        url += path.isEmpty ? "/" : path
        if let query {
            url += "?"
            url += query
        }
        return .success(url)
    }

    /// Each segment after the leading `/` (of a path `checkPath` passed, so ASCII): not a dot
    /// segment, and fit as the API server decodes it (`checkDecoded`).
    private static func checkSegments(_ path: Substring) -> Refusal? {
        let utf8 = path.utf8
        guard var start = utf8.indices.first.map({ utf8.index(after: $0) }) else { return nil }
        while true {
            let end = utf8[start...].firstIndex(of: UInt8(ascii: "/")) ?? utf8.endIndex
            let segment = path[start..<end]
            if segment == "." || segment == ".." { return Refusal(reason: "The API path may not contain . or .. segments.") }
            if let refusal = checkDecoded(segment) { return refusal }
            guard end != utf8.endIndex else { return nil }
            start = utf8.index(after: end)
        }
    }

    /// Whether two slashes follow each other (an empty segment; a trailing slash is not one).
    private static func hasEmptySegment(_ path: Substring) -> Bool {
        var afterSlash = false
        for byte in path.utf8 {
            let slash = byte == UInt8(ascii: "/")
            if slash && afterSlash { return true }
            afterSlash = slash
        }
        return false
    }

    /// RFC 3986 `pchar` and `/`, less `@`, with percent-encodings that do not decode to a
    /// separator, a dot, `@`, `%` or a control character.
    private static func checkPath(_ text: Substring) -> Refusal? {
        var utf8 = text.utf8[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard let high = utf8.popFirst().flatMap(hex), let low = utf8.popFirst().flatMap(hex) else {
                    return Refusal(reason: "The API path has a malformed percent-encoding.")
                }
                let decoded = high << 4 | low
                if decoded < 0x20 || decoded == 0x7F || "/\\.@%".utf8.contains(decoded) {
                    return Refusal(reason: "The API path encodes a character the proxy does not forward (/, \\, ., @, % or a control character).")
                }
                continue
            }
            let allowed = (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                || "-._~!$&'()*+,;=:/".utf8.contains(byte)
            guard allowed else {
                return Refusal(reason: "The API path contains a character the proxy does not forward (\\, @, a space, a control or non-ASCII character).")
            }
        }
        return nil
    }

    /// Characters an API server may take for a dot or a separator although they are not one: dot
    /// look-alikes (U+2024 one dot leader, U+FE52 small full stop, U+FF0E fullwidth full stop,
    /// ideographic full stops…), and anything whose compatibility form (NFKC, which some servers
    /// apply) holds a character the path may not encode.
    private static func isLookAlike(_ scalar: Unicode.Scalar) -> Bool {
        if [0x2024, 0x2025, 0x2026, 0x3002, 0xFE52, 0xFF0E, 0xFF61].contains(scalar.value) { return true }
        return String(scalar).precomposedStringWithCompatibilityMapping.contains { "/\\.@%;".contains($0) }
    }

    /// The segment as the API server decodes it: UTF-8, without look-alikes, and not dots (or
    /// nothing) before a path parameter. The segment's form is already checked (`checkPath`).
    private static func checkDecoded(_ segment: Substring) -> Refusal? {
        // Nothing encoded (the common case): the segment is ASCII as it is (`checkPath`).
        guard segment.utf8.contains(UInt8(ascii: "%")) else { return dotsBeforeParameter(segment) }
        var bytes: [UInt8] = []
        var utf8 = segment.utf8[...]
        while let byte = utf8.popFirst() {
            guard byte == UInt8(ascii: "%"), let high = utf8.popFirst().flatMap(hex), let low = utf8.popFirst().flatMap(hex) else {
                bytes.append(byte)
                continue
            }
            bytes.append(high << 4 | low)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            return Refusal(reason: "The API path has percent-encoded bytes that are not UTF-8.")
        }
        if text.unicodeScalars.contains(where: { !$0.isASCII && isLookAlike($0) }) {
            return Refusal(reason: "The API path encodes a character that stands for a dot or a separator.")
        }
        return dotsBeforeParameter(Substring(text))
    }

    /// A segment of dots (or nothing) before a path parameter: `..;` is `..` to some servers.
    private static func dotsBeforeParameter(_ segment: Substring) -> Refusal? {
        guard let semicolon = segment.utf8.firstIndex(of: UInt8(ascii: ";")),
              segment.utf8[..<semicolon].allSatisfy({ $0 == UInt8(ascii: ".") }) else { return nil }
        return Refusal(reason: "The API path may not contain a segment of dots (or none) before a ; (read as . or .. by some servers).")
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
