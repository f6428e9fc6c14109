import WireValues

/// Which headers cross the API proxy. Towards the API: an allowlist (content negotiation,
/// conditional and range requests, and the provider's own `api_headers`) — never the client's
/// credentials, cookies, host, hop-by-hop or forwarding headers. Towards the client: the content
/// headers, validators, links, redirects' `Location`, `Retry-After`, `WWW-Authenticate`, a 405's
/// `Allow` and rate-limit headers — never `Set-Cookie` or hop-by-hop headers; the server adds its own
/// security headers and `Cache-Control: no-store`. Either way, a header the message's own
/// `Connection` lists is hop-by-hop and stays behind.
enum ProxyHeaders {
    /// Passed to every API when the client sends them.
    static let standard = ["Accept", "Accept-Language", "Content-Type", "If-Match", "If-None-Match",
                           "If-Modified-Since", "If-Unmodified-Since", "If-Range", "Range"]

    /// Of `standard`, those a request may give once only (RFC 9110: not lists); the others, and a
    /// provider's `api_headers`, are lists, whose field lines join.
    static let singletons = ["Content-Type", "If-Modified-Since", "If-Unmodified-Since", "If-Range", "Range"]

    private static let forbidden: Set<String> = [
        "authorization", "cookie", "host", "connection", "keep-alive", "te", "trailer", "transfer-encoding",
        "upgrade", "content-length", "expect", "forwarded", "via", "origin", "referer", "dpop",
    ]

    /// Why `name` cannot be one of a provider's `api_headers`, or nil when it can.
    static func refusal(ofExtra name: String) -> String? {
        guard isTokenName(name) else { return "is not a header name" }
        if isNeverPassed(name.lowercased()) { return "is a header the proxy never passes to an API" }
        return nil
    }

    /// The client headers a provider's API gets when the client sends them: the standard ones and
    /// the provider's `api_headers`, less the trace headers (the proxy passes those on itself).
    static func passedToAPI(extras: [String]) -> [String] {
        (standard + extras).filter { !isTrace($0.lowercased()) }
    }

    /// The request id and trace headers, which the proxy passes on itself (checked, and the
    /// broker's id when the client's was not fit to pass).
    static func isTrace(_ lowercased: String) -> Bool {
        lowercased == "x-request-id" || lowercased == "traceparent" || lowercased == "tracestate"
    }

    /// Client headers that never reach an API, whatever the configuration.
    static func isNeverPassed(_ lowercased: String) -> Bool {
        forbidden.contains(lowercased) || lowercased.hasPrefix("proxy-") || lowercased.hasPrefix("x-forwarded-")
    }

    private static let passedBack = [
        "content-type", "content-language", "content-disposition", "content-range", "content-encoding", "accept-ranges",
        "etag", "last-modified", "link", "location", "retry-after", "www-authenticate", "vary", "allow",
    ].map { Array($0.utf8) }
    private static let passedBackPrefixes = ["x-ratelimit-", "ratelimit", "x-rate-limit-"].map { Array($0.utf8) }

    /// Whether an API's answer header goes back to the client. Compared as bytes, without case:
    /// this runs for every header of every proxied answer.
    static func passesBack(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { name in
            passedBack.contains { HeaderName.same($0, name) }
                || passedBackPrefixes.contains { name.count >= $0.count && HeaderName.same($0, UnsafeBufferPointer(rebasing: name.prefix($0.count))) }
        }
    }

    /// Whether `connection`, a `Connection` header's value, lists `name`: the header is then
    /// hop-by-hop for that message (RFC 9110 §7.6.1) and not passed on, whichever way it goes.
    /// Read in place: most messages carry no `Connection`, or one word.
    static func isListed(_ name: String, in connection: String?) -> Bool {
        guard let connection else { return false }
        let bytes = connection.utf8
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: ",")) ?? bytes.endIndex
            var option = bytes[start..<end]
            while let first = option.first, first == 0x20 || first == 0x09 { option = option.dropFirst() }
            while let last = option.last, last == 0x20 || last == 0x09 { option = option.dropLast() }
            if HeaderName.same(option, name.utf8) { return true }
            start = end < bytes.endIndex ? bytes.index(after: end) : end
        }
        return false
    }

    /// The value of the header `name` among `headers`, compared as header names are (ASCII,
    /// without case).
    static func value(of name: String, in headers: [(name: String, value: String)]) -> String? {
        headers.first { HeaderName.same($0.name.utf8, name.utf8) }?.value
    }

    /// Every value of the header `name` among `headers`, joined by ", " (a list given in several
    /// fields, RFC 9110 §5.3); nil when there is none.
    static func joinedValue(of name: String, in headers: [(name: String, value: String)]) -> String? {
        var joined: String?
        for header in headers where HeaderName.same(header.name.utf8, name.utf8) {
            joined = joined.map { $0 + ", " + header.value } ?? header.value
        }
        return joined
    }

    /// Whether a header name can be passed on as it is: an RFC 9110 token (what libmicrohttpd
    /// sends; a name with a space in it would make it refuse the whole answer).
    static func isTokenName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// Whether a header value can be passed on as it is: visible ASCII, spaces and tabs.
    static func isPlainValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 == 0x09 || (0x20...0x7E).contains($0) }
    }
}
