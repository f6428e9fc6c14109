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
        // Read as bytes: this runs for every proxied request, and a path's characters (grapheme
        // clusters) are not what an API server reads either.
        let refusal = path.utf8.withContiguousStorageIfAvailable(check) ?? Array(path.utf8).withUnsafeBufferPointer(check)
        if let refusal { return .failure(refusal) }
        if let query, !query.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "#") }) {
            return .failure(Refusal(reason: "The query contains a character the proxy does not forward (#, a space, a control or non-ASCII character): percent-encode it."))
        }
        // One allocation for the URL: it is made for every proxied request.
        var url = ""
        url.reserveCapacity(base.utf8.count + path.utf8.count + (query.map { $0.utf8.count + 1 } ?? 0) + 1)
        url += base.utf8.last == UInt8(ascii: "/") ? base.dropLast() : base[...]
        url += path.isEmpty ? "/" : path
        if let query {
            url += "?"
            url += query
        }
        return .success(url)
    }

    /// Why the path's bytes are refused, or nil when they pass.
    private static func check(_ path: UnsafeBufferPointer<UInt8>) -> Refusal? {
        guard path.isEmpty || path[0] == UInt8(ascii: "/") else { return Refusal(reason: "The API path must start with /.") }
        if let refusal = checkPath(path) { return refusal }
        if let refusal = checkSegments(path) { return refusal }
        if hasEmptySegment(path) { return Refusal(reason: "The API path may not contain empty segments.") }
        return nil
    }

    /// Each segment after the leading `/` (of a path `checkPath` passed, so ASCII): not a dot
    /// segment, and fit as the API server decodes it (`checkDecoded`).
    private static func checkSegments(_ path: UnsafeBufferPointer<UInt8>) -> Refusal? {
        guard !path.isEmpty else { return nil }
        var start = 1
        while true {
            let end = path[start...].firstIndex(of: UInt8(ascii: "/")) ?? path.endIndex
            let segment = UnsafeBufferPointer(rebasing: path[start..<end])
            if !segment.isEmpty, segment.count <= 2, segment.allSatisfy({ $0 == UInt8(ascii: ".") }) {
                return Refusal(reason: "The API path may not contain . or .. segments.")
            }
            if let refusal = checkDecoded(segment) { return refusal }
            guard end != path.endIndex else { return nil }
            start = end + 1
        }
    }

    /// Whether two slashes follow each other (an empty segment; a trailing slash is not one).
    private static func hasEmptySegment(_ path: UnsafeBufferPointer<UInt8>) -> Bool {
        var afterSlash = false
        for byte in path {
            let slash = byte == UInt8(ascii: "/")
            if slash && afterSlash { return true }
            afterSlash = slash
        }
        return false
    }

    /// RFC 3986 `pchar` and `/`, less `@`, with percent-encodings that do not decode to a
    /// separator, a dot, `@`, `%` or a control character.
    private static func checkPath(_ path: UnsafeBufferPointer<UInt8>) -> Refusal? {
        var index = 0
        while index < path.count {
            let byte = path[index]
            index += 1
            if byte == UInt8(ascii: "%") {
                guard index + 1 < path.count, let high = hex(path[index]), let low = hex(path[index + 1]) else {
                    return Refusal(reason: "The API path has a malformed percent-encoding.")
                }
                index += 2
                let decoded = high << 4 | low
                if decoded < 0x20 || decoded == 0x7F || isSeparatorLike(decoded) {
                    return Refusal(reason: "The API path encodes a character the proxy does not forward (/, \\, ., @, % or a control character).")
                }
                continue
            }
            guard isPathByte(byte) else {
                return Refusal(reason: "The API path contains a character the proxy does not forward (\\, @, a space, a control or non-ASCII character).")
            }
        }
        return nil
    }

    /// A byte of RFC 3986 `pchar` (unencoded) or `/`, less `@`.
    private static func isPathByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"), UInt8(ascii: "$"),
             UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"),
             UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "/"): true
        default: false
        }
    }

    /// `/`, `\`, `.`, `@` or `%`: what a path may not encode.
    private static func isSeparatorLike(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "/"), UInt8(ascii: "\\"), UInt8(ascii: "."), UInt8(ascii: "@"), UInt8(ascii: "%"): true
        default: false
        }
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
    private static func checkDecoded(_ segment: UnsafeBufferPointer<UInt8>) -> Refusal? {
        // Nothing encoded (the common case): the segment is ASCII as it is (`checkPath`).
        guard segment.contains(UInt8(ascii: "%")) else { return dotsBeforeParameter(segment) }
        var bytes: [UInt8] = []
        var index = 0
        while index < segment.count {
            // `checkPath` has passed every percent-encoding: two hex digits follow each `%`.
            if segment[index] == UInt8(ascii: "%"), let high = hex(segment[index + 1]), let low = hex(segment[index + 2]) {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(segment[index])
                index += 1
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            return Refusal(reason: "The API path has percent-encoded bytes that are not UTF-8.")
        }
        if text.unicodeScalars.contains(where: { !$0.isASCII && isLookAlike($0) }) {
            return Refusal(reason: "The API path encodes a character that stands for a dot or a separator.")
        }
        return bytes.withUnsafeBufferPointer(dotsBeforeParameter)
    }

    /// A segment of dots (or nothing) before a path parameter: `..;` is `..` to some servers.
    private static func dotsBeforeParameter(_ segment: UnsafeBufferPointer<UInt8>) -> Refusal? {
        guard let semicolon = segment.firstIndex(of: UInt8(ascii: ";")),
              segment[..<semicolon].allSatisfy({ $0 == UInt8(ascii: ".") }) else { return nil }
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
