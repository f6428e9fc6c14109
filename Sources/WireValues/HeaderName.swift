/// HTTP header names, compared as RFC 9110 §5.1 says: ASCII, case-insensitively — only the
/// letters fold — and without allocating (the server and the API proxy compare on every request).
public enum HeaderName {
    /// Whether `a` and `b` are the same header name. Inlinable, so that each caller gets it made
    /// for its own collections: called through generics, each byte cost a metadata lookup.
    @inlinable
    public static func same(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        var other = b.startIndex
        for x in a {
            let y = b[other]
            b.formIndex(after: &other)
            if x == y { continue }
            let folded = x | 0x20
            guard folded == y | 0x20, folded >= UInt8(ascii: "a"), folded <= UInt8(ascii: "z") else { return false }
        }
        return true
    }
}
