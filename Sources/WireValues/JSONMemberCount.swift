/// How many members a JSON object document writes, counted on its bytes: decoding keeps one
/// value per key, so a key written twice (`{"code":"a","code":"b"}`, or spelled once with an
/// escape, `"c\u006fde"`) shows only as a count above the decoded object's.
package enum JSONMemberCount {
    /// The members of the outermost object of `document`, which must be valid JSON: the colons
    /// at depth one, outside strings.
    package static func of(_ document: [UInt8]) -> Int {
        var members = 0
        var depth = 0
        var inString = false
        var escaped = false
        for byte in document {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            case UInt8(ascii: ":") where depth == 1: members += 1
            default: break
            }
        }
        return members
    }
}
