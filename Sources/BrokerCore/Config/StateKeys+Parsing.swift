import BrokerCrypto

extension StateKeys {
    /// What a state key looks like, for messages.
    static let expectedForm = "standard base64 with = padding of 32 bytes, as openssl rand -base64 32 prints"

    /// Parses the value of a state-key variable or the content of a state-key file: one or more
    /// keys separated by newlines, commas or whitespace, the current key first.
    ///
    /// Every bad key is reported, by its position ("key 2 of 3"), in one message; the message
    /// never quotes a key or any part of one.
    static func parse(_ text: String) -> Result<StateKeys, ConfigValueError> {
        let pieces = text.split { $0 == "," || $0.isWhitespace || $0.isNewline }
        guard !pieces.isEmpty else {
            return .failure(ConfigValueError("holds no key; write one or more keys (\(expectedForm)), "
                + "separated by newlines, commas or spaces"))
        }
        var keys: [SymmetricKey] = []
        var ids: [UInt64] = []
        var positions: [Int] = []
        var complaints: [String] = []
        for (index, piece) in pieces.enumerated() {
            let name = pieces.count == 1 ? "the key" : "key \(index + 1) of \(pieces.count)"
            switch key(piece) {
            case .failure(let invalid):
                complaints.append("\(name) \(invalid.message)")
            case .success(let key):
                let id = id(of: key)
                if let earlier = ids.firstIndex(of: id) {
                    let same = keys[earlier].withUnsafeBytes { a in
                        key.withUnsafeBytes { b in constantTimeEquals(a, b) }
                    }
                    complaints.append(same ? "\(name) repeats key \(positions[earlier])"
                        : "\(name) has the same key id as key \(positions[earlier]); replace it with a new key")
                } else {
                    keys.append(key)
                    ids.append(id)
                    positions.append(index + 1)
                }
            }
        }
        guard complaints.isEmpty, let current = keys.first else {
            return .failure(ConfigValueError(complaints.joined(separator: "; ")))
        }
        return .success(StateKeys(current: current, older: Array(keys.dropFirst())))
    }

    /// One key; the message says what is wrong without quoting it.
    private static func key(_ text: Substring) -> Result<SymmetricKey, ConfigValueError> {
        if let key = SymmetricKey(base64: text) { return .success(key) }
        guard let count = base64ByteCount(text) else {
            let urlAlphabet = text.contains("-") || text.contains("_")
            return .failure(ConfigValueError("is not \(expectedForm)"
                + (urlAlphabet ? " (it has - or _ of the URL alphabet; use + and /)" : "")))
        }
        guard count == SymmetricKey.byteCount else {
            return .failure(ConfigValueError(
                "decodes to \(count) bytes, not \(SymmetricKey.byteCount); openssl rand -base64 32 prints a key of the right size"))
        }
        return .failure(ConfigValueError("is not canonical base64: the unused bits of its last character are not zero"))
    }

    /// The number of bytes `text` encodes when it is padded standard base64, without decoding
    /// it; `nil` when it is not.
    private static func base64ByteCount(_ text: Substring) -> Int? {
        let utf8 = text.utf8
        guard !utf8.isEmpty, utf8.count % 4 == 0 else { return nil }
        let padding = utf8.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2, utf8.dropLast(padding).allSatisfy(isBase64Symbol) else { return nil }
        return utf8.count / 4 * 3 - padding
    }

    private static func isBase64Symbol(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"): true
        default: false
        }
    }
}
