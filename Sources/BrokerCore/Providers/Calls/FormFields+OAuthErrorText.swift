import WireValues

extension FormFields {
    /// Whether `text` fits RFC 6749's `error` / `error_description` syntax (`%x20-21 / %x23-5B /
    /// %x5D-7E`) in at most `limit` bytes.
    static func isOAuthErrorText(_ text: String, limit: Int = 256) -> Bool {
        !text.isEmpty && text.utf8.count <= limit
            && text.utf8.allSatisfy { $0 == 0x20 || $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }

    /// An OAuth error code as safe to repeat in a message; anything else is not repeated.
    static func printableCode(_ code: String) -> String {
        isOAuthErrorText(code) ? code : "unreadable error code"
    }
}
