import WireValues

extension JSONValue {
    /// The value at a dot-separated path such as `data.0.login` (numeric segments index arrays);
    /// `nil` when a step is missing or the value there is JSON `null`.
    func profileValue(atPath path: String) -> JSONValue? {
        var current = self
        for segment in path.split(separator: ".", omittingEmptySubsequences: false) {
            switch current {
            case .object:
                guard let next = current[String(segment)] else { return nil }
                current = next
            case .array(let elements):
                guard let index = Int(segment), elements.indices.contains(index) else { return nil }
                current = elements[index]
            default:
                return nil
            }
        }
        if case .null = current { return nil }
        return current
    }

    /// The value as profile text: a non-empty string, or a number as its decimal text (GitHub's
    /// numeric `id` 583231 becomes `"583231"`). Booleans, arrays and objects are not text.
    var profileText: String? {
        switch self {
        case .string(let text): return text.isEmpty ? nil : text
        case .int(let number): return String(number)
        case .double(let number):
            if number.isFinite, number == number.rounded(), abs(number) < 9.0e15 { return String(Int(number)) }
            return number.isFinite ? String(number) : nil
        default: return nil
        }
    }

    /// The value as a flag: a boolean, the strings `"true"`/`"false"` (some providers send
    /// `email_verified` as a string) or the numbers 1 and 0.
    var profileFlag: Bool? {
        switch self {
        case .bool(let flag): return flag
        case .string(let text):
            switch text.lowercased() {
            case "true": return true
            case "false": return false
            default: return nil
            }
        case .int(1): return true
        case .int(0): return false
        default: return nil
        }
    }
}
