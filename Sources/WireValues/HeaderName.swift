/// HTTP header names, compared as RFC 9110 §5.1 says: ASCII, case-insensitively — only the
/// letters fold — and without allocating (the server and the API proxy compare on every request).
public enum HeaderName {
    /// Whether `a` and `b` are the same header name.
    public static func same(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { x, y in
            x == y || (x | 0x20 == y | 0x20 && (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(x | 0x20))
        }
    }
}
