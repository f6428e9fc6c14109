extension ConfigDocumentDecoder {
    /// Reads `state.key_env` or `state.key_file` (at most one of them) into
    /// `draft.stateKeyReference`; the keys themselves are read once the environment is merged.
    /// Leaving both out keeps the default, `key_env: BROKER_STATE_KEY`.
    func decodeStateKeyReference(_ reader: YAMLMappingReader, into draft: inout ConfigDraft,
                                 problems: inout ConfigProblemList) {
        let hasEnv = reader.has("key_env")
        let hasFile = reader.has("key_file")
        guard hasEnv || hasFile else { return }
        draft.stateKeyReference = nil
        if hasEnv && hasFile {
            problems.add(reader.path.child("key_file"), "set only one of key_env and key_file",
                         line: reader.line(of: "key_file"))
            return
        }
        let key = hasEnv ? "key_env" : "key_file"
        guard let text = reader.string(key, problems: &problems) else { return }
        if hasEnv && !SecretReference.isValidVariableName(text) {
            problems.add(reader.path.child(key), "is not a valid environment variable name (letters, digits "
                + "and _, not starting with a digit)", line: reader.line(of: key))
            return
        }
        draft.stateKeyReference = hasEnv ? .environment(text) : .file(text)
        draft.lines[reader.path.child(key).description] = reader.line(of: key)
    }
}
