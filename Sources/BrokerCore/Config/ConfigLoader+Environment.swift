extension ConfigLoader {
    /// The environment variables that override settings of the file, each with the dotted key it
    /// overrides and a one-line description, for the README and `--help`. An empty variable
    /// counts as unset. A bad value is a problem whose key is the variable's name.
    ///
    /// The state keys are not here: they are read from the variable `state.key_env` names
    /// (`BROKER_STATE_KEY` by default), not overridden by one.
    public static let environmentOverrides: [(variable: String, key: String, description: String)] =
        ConfigSetting.all.compactMap { setting in
            setting.variable.map { (variable: $0, key: setting.key, description: setting.description) }
        }

    /// Applies the overrides present in `environment` to `draft`.
    static func applyEnvironment(_ environment: [String: String], to draft: inout ConfigDraft,
                                 problems: inout ConfigProblemList) {
        for setting in ConfigSetting.all {
            guard let variable = setting.variable, let text = environment[variable], !text.isEmpty else { continue }
            switch setting.apply(&draft, text) {
            case .success: draft.lines[setting.key] = nil
            case .failure(let invalid): problems.add(variable, invalid.message, line: nil)
            }
        }
    }

    /// A command-line flag's value for the setting `key`, over the file and the environment.
    static func applyFlag(_ flag: String, setting key: String, _ text: String, to draft: inout ConfigDraft,
                          problems: inout ConfigProblemList) {
        guard let setting = ConfigSetting.all.first(where: { $0.key == key }) else { preconditionFailure("no setting \(key)") }
        switch setting.apply(&draft, text) {
        case .success: draft.lines[key] = nil
        case .failure(let invalid): problems.add(flag, invalid.message, line: nil)
        }
    }
}

extension ConfigLoader {
    /// `BROKER_DEV`: development mode from the environment, spelled as every boolean setting
    /// (true/false, yes/no, on/off, 1/0); unset or empty is false, anything else an error.
    public static func developmentMode(environment: [String: String]) throws(ConfigError) -> Bool {
        guard let text = environment["BROKER_DEV"], !text.isEmpty else { return false }
        switch ConfigValueParsing.boolean(text) {
        case .success(let value): return value
        case .failure(let error): throw ConfigError(key: "BROKER_DEV", message: error.message)
        }
    }
}
