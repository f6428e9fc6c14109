import Yams

/// Reads one YAML mapping of the configuration: reports unknown keys once, then hands out typed
/// values, recording a problem (with its key path and line) for each value of the wrong type.
struct YAMLMappingReader {
    /// Where this mapping sits in the document.
    let path: ConfigKeyPath
    /// The line of the mapping itself (or of its parent key when it is empty).
    let line: Int?
    /// Keys in document order.
    private(set) var keys: [String] = []
    /// Forbidden keys that were present (already reported).
    private(set) var refusedKeys: [String] = []
    private var entries: [String: (keyLine: Int?, value: Node)] = [:]

    /// Opens `node` as a mapping. A null node reads as an empty mapping, so that a section whose
    /// entries are all commented out is simply empty. Any other kind of node is a problem and
    /// answers `nil`.
    ///
    /// - Parameters:
    ///   - known: the keys this mapping may hold, or `nil` when keys are free-form (ids, parameters).
    ///   - forbidden: keys that are recognised but refused, with the message to give.
    init?(_ node: Node, at path: ConfigKeyPath, known: [String]?, forbidden: [String: String] = [:],
          problems: inout ConfigProblemList) {
        self.path = path
        self.line = node.lineNumber
        if node.isNull { return }
        guard case .mapping(let mapping) = node else {
            problems.add(path, "expected a mapping, got \(node.kindDescription)", line: node.lineNumber)
            return nil
        }
        for (keyNode, value) in mapping {
            guard case .scalar(let scalar) = keyNode, !keyNode.isNull else {
                problems.add(path, "keys must be plain strings, got \(keyNode.kindDescription)",
                             line: keyNode.lineNumber)
                continue
            }
            let key = scalar.string
            if let message = forbidden[key] {
                problems.add(path.child(key), message, line: keyNode.lineNumber)
                refusedKeys.append(key)
                continue
            }
            if let known, !known.contains(key) {
                let hint = KeySuggestion.hint(for: key, in: known)
                problems.add(path.child(key), "unknown key\(hint)", line: keyNode.lineNumber)
                continue
            }
            keys.append(key)
            entries[key] = (keyNode.lineNumber, value)
        }
    }

    /// Whether `key` is present (with any value, even null).
    func has(_ key: String) -> Bool { entries[key] != nil }

    /// The value node under `key`.
    func node(_ key: String) -> Node? { entries[key]?.value }

    /// The line of `key` itself, falling back to this mapping's line.
    func line(of key: String) -> Int? { entries[key]?.keyLine ?? line }

    /// The text of the scalar under `key`; `nil` when absent or not a scalar (recorded).
    func scalar(_ key: String, expected: String, problems: inout ConfigProblemList) -> String? {
        guard let node = node(key) else { return nil }
        return node.scalarText(expected: expected, at: path.child(key), problems: &problems)
    }

    /// A non-empty string.
    func string(_ key: String, problems: inout ConfigProblemList) -> String? {
        guard let text = scalar(key, expected: "a string", problems: &problems) else { return nil }
        if text.isEmpty {
            problems.add(path.child(key), "must not be empty", line: line(of: key))
            return nil
        }
        return text
    }

    /// `display_name`: what a person is shown for an app or a provider — at most 100 characters,
    /// no control character; nil when absent (or wrong, recorded).
    func displayName(problems: inout ConfigProblemList) -> String? {
        guard let text = string("display_name", problems: &problems) else { return nil }
        guard text.count <= 100, !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            problems.add(path.child("display_name"), "must be at most 100 characters, without control characters", line: line(of: "display_name"))
            return nil
        }
        return text
    }

    /// Parses the scalar under `key` with `parse`, recording a failure.
    func parsed<T>(_ key: String, expected: String, problems: inout ConfigProblemList,
                   _ parse: (String) -> Result<T, ConfigValueError>) -> T? {
        guard let text = scalar(key, expected: expected, problems: &problems) else { return nil }
        return problems.check(parse(text), at: path.child(key), line: node(key)?.lineNumber)
    }

    /// A list of strings; a single scalar is not accepted as a list.
    func stringList(_ key: String, problems: inout ConfigProblemList) -> [(text: String, path: ConfigKeyPath, line: Int?)]? {
        guard let node = node(key) else { return nil }
        guard case .sequence(let sequence) = node else {
            problems.add(path.child(key), "expected a list, got \(node.kindDescription)", line: node.lineNumber)
            return nil
        }
        var items: [(text: String, path: ConfigKeyPath, line: Int?)] = []
        var valid = true
        for (index, element) in sequence.enumerated() {
            let elementPath = path.child(key).index(index)
            if let text = element.scalarText(expected: "a string", at: elementPath, problems: &problems) {
                items.append((text, elementPath, element.lineNumber))
            } else {
                valid = false
            }
        }
        return valid ? items : nil
    }
}

extension Node {
    /// The 1-based line where this node starts.
    var lineNumber: Int? { mark?.line }

    /// Whether this is a null scalar (`~`, `null`, or nothing at all).
    var isNull: Bool {
        guard case .scalar = self else { return false }
        return tag.rawValue == Tag.Name.null.rawValue
    }

    /// How to name this node in a type error: the quoted text of a scalar, else its kind.
    var kindDescription: String {
        switch self {
        case .scalar(let scalar): isNull ? "nothing" : ConfigValueParsing.quoted(scalar.string)
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .alias: "an alias"
        }
    }

    /// The text of a non-null scalar; anything else is recorded as a type error.
    func scalarText(expected: String, at path: ConfigKeyPath, problems: inout ConfigProblemList) -> String? {
        if case .scalar(let scalar) = self, !isNull { return scalar.string }
        problems.add(path, "expected \(expected), got \(kindDescription)", line: lineNumber)
        return nil
    }
}
