extension ConfigLoader {
    /// The environment variables that override settings of the file, each with the dotted key it
    /// overrides and a one-line description, for the README and `--help`. An empty variable
    /// counts as unset. A bad value is a problem whose key is the variable's name.
    public static let environmentOverrides: [(variable: String, key: String, description: String)] =
        ConfigSetting.all.map { (variable: $0.variable, key: $0.key, description: $0.description) }

    /// Applies the overrides present in `environment` to `draft`.
    static func applyEnvironment(_ environment: [String: String], to draft: inout ConfigDraft,
                                 problems: inout ConfigProblemList) {
        for setting in ConfigSetting.all {
            guard let text = environment[setting.variable], !text.isEmpty else { continue }
            switch setting.apply(&draft, text) {
            case .success: draft.lines[setting.key] = nil
            case .failure(let invalid): problems.add(setting.variable, invalid.message, line: nil)
            }
        }
    }
}
