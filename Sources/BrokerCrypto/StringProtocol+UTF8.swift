extension StringProtocol {
    /// Calls `body` with the string's UTF-8 bytes: in place when the string stores them
    /// contiguously (native Swift strings and their substrings), otherwise from a copy.
    func withUTF8Bytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        if let result = utf8.withContiguousStorageIfAvailable({
            body(UnsafeRawBufferPointer($0))
        }) {
            return result
        }
        return Array(utf8).withUnsafeBytes(body)
    }
}
