extension YAMLMappingReader {
    /// What a mapping says of a secret written as `<prefix>_env` (an environment variable's name)
    /// or `<prefix>_file` (a file's path).
    enum SecretReferenceEntry {
        case absent
        /// Both keys, or a bad value: already reported.
        case invalid
        case found(SecretReference, key: String)
    }

    /// Reads `<prefix>_env` or `<prefix>_file` — at most one of them — reporting what is wrong.
    func secretReference(_ prefix: String, problems: inout ConfigProblemList) -> SecretReferenceEntry {
        let envKey = prefix + "_env"
        let fileKey = prefix + "_file"
        let hasEnv = has(envKey)
        let hasFile = has(fileKey)
        guard hasEnv || hasFile else { return .absent }
        guard !(hasEnv && hasFile) else {
            problems.add(path.child(fileKey), "set only one of \(envKey) and \(fileKey)", line: line(of: fileKey))
            return .invalid
        }
        let key = hasEnv ? envKey : fileKey
        guard let text = string(key, problems: &problems) else { return .invalid }
        guard hasEnv else { return .found(.file(text), key: key) }
        guard SecretReference.isValidVariableName(text) else {
            problems.add(path.child(key), "is not a valid environment variable name (letters, digits "
                + "and _, not starting with a digit)", line: line(of: key))
            return .invalid
        }
        return .found(.environment(text), key: key)
    }
}
