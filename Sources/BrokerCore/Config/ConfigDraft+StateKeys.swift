extension ConfigDraft {
    /// Reads the state keys from where the file (or the default) says, once file and environment
    /// are merged, and stores them with their source in ``state``.
    ///
    /// A problem is placed at `state.key_env` or `state.key_file` (with its line in `file`) when
    /// the file names the source, else at the default variable's name, like an environment
    /// override.
    mutating func resolveStateKeys(environment: [String: String], baseDirectory: String?,
                                   file: String?) -> [ConfigProblem] {
        guard let reference = stateKeyReference else { return [] }
        state.keySource = reference.source(baseDirectory: baseDirectory)
        if case .file(let path) = reference { state.keyFile = SecretReference.absolutePath(path, baseDirectory: baseDirectory) }
        switch reference.resolve(environment: environment, baseDirectory: baseDirectory) {
        case .success(let keys):
            state.keys = keys
            return []
        case .failure(let invalid):
            let configKey = switch reference {
            case .environment: "state.key_env"
            case .file: "state.key_file"
            }
            guard let line = lines[configKey] else {
                return [ConfigProblem(key: StateSettings.defaultKeyVariable, message: invalid.message)]
            }
            return [ConfigProblem(key: configKey, message: invalid.message, line: line, file: file)]
        }
    }
}
