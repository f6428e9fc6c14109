import Yams

extension ProviderDecoder {
    /// The entry's preset and the values of its placeholders.
    struct PresetChoice {
        /// The preset named by `preset:`, if any.
        var preset: ProviderPreset?
        /// Placeholder values: the entry's keys (`tenant`), else the preset's defaults.
        var values: [String: String] = [:]
        /// Whether `preset:` or a placeholder was wrong (recorded); endpoints are then not resolved.
        var failed = false
    }

    /// Reads `preset:` and the placeholder keys (`tenant`). An unknown name is a problem that
    /// lists the known presets; a placeholder key is a problem unless the preset uses it.
    func decodePreset(_ reader: YAMLMappingReader, problems: inout ConfigProblemList) -> PresetChoice {
        var choice = PresetChoice()
        if reader.has("preset") {
            if let name = reader.string("preset", problems: &problems) {
                choice.preset = ProviderPreset.named(name)
                if choice.preset == nil {
                    let hint = KeySuggestion.hint(for: name, in: ProviderPreset.names)
                    problems.add(path.child("preset"), "unknown preset \(ConfigValueParsing.quoted(name))\(hint); "
                        + "known presets: \(ProviderPreset.names.joined(separator: ", "))", line: reader.line(of: "preset"))
                }
            }
            choice.failed = choice.preset == nil
        }
        for key in ProviderPreset.placeholderKeys where reader.has(key) {
            guard let placeholder = choice.preset?.placeholder(named: key) else {
                if !choice.failed {
                    let users = ProviderPreset.all.filter { $0.placeholder(named: key) != nil }.map(\.name)
                    problems.add(path.child(key), "is only used with a preset that has a \(key) "
                        + "(\(users.joined(separator: ", ")))", line: reader.line(of: key))
                }
                continue
            }
            guard let text = reader.string(key, problems: &problems) else {
                choice.failed = true
                continue
            }
            guard PresetPlaceholder.isValidValue(text) else {
                problems.add(path.child(key), "invalid \(key) \(ConfigValueParsing.quoted(text)): expected "
                    + "\(placeholder.description) (letters, digits, -, _ and .)", line: reader.line(of: key))
                choice.failed = true
                continue
            }
            choice.values[key] = text
        }
        for placeholder in choice.preset?.placeholders ?? [] where !reader.has(placeholder.name) {
            if let value = placeholder.defaultValue {
                choice.values[placeholder.name] = value
            } else {
                problems.add(path.child(placeholder.name), "required key is missing: preset \(choice.preset?.name ?? "") "
                    + "needs \(placeholder.name) (\(placeholder.description))", line: line)
                choice.failed = true
            }
        }
        return choice
    }
}
