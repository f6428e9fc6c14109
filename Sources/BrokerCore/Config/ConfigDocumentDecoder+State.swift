extension ConfigDocumentDecoder {
    /// Reads `state.key_env` or `state.key_file` (at most one of them) into
    /// `draft.stateKeyReference`; the keys themselves are read once the environment is merged.
    /// Leaving both out keeps the default, `key_env: BROKER_STATE_KEY`.
    func decodeStateKeyReference(_ reader: YAMLMappingReader, into draft: inout ConfigDraft,
                                 problems: inout ConfigProblemList) {
        switch reader.secretReference("key", problems: &problems) {
        case .absent:
            break
        case .invalid:
            draft.stateKeyReference = nil
        case .found(.environment(let name), let key):
            draft.stateKeyReference = .environment(name)
            draft.lines[reader.path.child(key).description] = reader.line(of: key)
        case .found(.file(let path), let key):
            draft.stateKeyReference = .file(path)
            draft.lines[reader.path.child(key).description] = reader.line(of: key)
        }
    }

    /// Reads `state.postgres.password_env` or `password_file` (at most one) and resolves it.
    /// Leaving both out takes `BROKER_POSTGRES_PASSWORD` when it is set, else no password.
    func decodePostgresPassword(_ reader: YAMLMappingReader, into draft: inout ConfigDraft, problems: inout ConfigProblemList) {
        guard case .found(let reference, let key) = reader.secretReference("password", problems: &problems) else { return }
        switch reference.resolve(environment: environment, baseDirectory: baseDirectory) {
        case .success(let secret): draft.state.postgres.password = secret
        case .failure(let error): problems.add(reader.path.child(key), error.message, line: reader.line(of: key))
        }
    }
}
