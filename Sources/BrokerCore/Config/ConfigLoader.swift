import Foundation
import Yams

/// Loads the broker's configuration: embedded defaults, then the YAML file, then the
/// environment overrides in ``environmentOverrides``. Every problem found on the way is
/// reported together in one ``ConfigError``.
public enum ConfigLoader: Sendable {
    /// Loads the configuration.
    ///
    /// - Parameters:
    ///   - path: the YAML file; `nil` means the embedded defaults. Relative file paths
    ///     (`client_secret_file`, `state.key_file`, the TLS files, …) are resolved from the file's
    ///     directory.
    ///   - environment: the process environment, for overrides, `client_secret_env` and the
    ///     state keys (`state.key_env`, by default `BROKER_STATE_KEY`).
    ///   - listen: `serve --listen`, over `server.listen` from everywhere else; checked with the
    ///     rest (the admin listener must be another).
    /// - Throws: a ``ConfigError`` listing every problem.
    /// The configuration file to read: `--config`'s, else `BROKER_CONFIG`'s; an empty variable is
    /// unset, as every other `BROKER_*` one (a Compose `${BROKER_CONFIG:-}` sets it empty).
    public static func path(option: String?, environment: [String: String]) -> String? {
        option ?? environment["BROKER_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
    }

    public static func load(path: String?, environment: [String: String], listen: String? = nil) throws(ConfigError) -> BrokerConfig {
        guard let path else {
            return try load(yaml: "", fileName: "<defaults>", baseDirectory: nil, environment: environment, listen: listen)
        }
        guard !path.isEmpty else {
            throw ConfigError(key: "", message: "the configuration file's path (--config) is empty", file: "<command line>")
        }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            let reason = !exists ? "it does not exist" : isDirectory.boolValue ? "it is a directory"
                : "it is not readable UTF-8 text"
            throw ConfigError(key: "", message: "cannot read the configuration file: \(reason)", file: path)
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return try load(yaml: text, fileName: path, baseDirectory: directory, environment: environment, listen: listen)
    }

    /// Loads the configuration from YAML text; `fileName` is used in messages only. Relative file
    /// paths are resolved from the working directory.
    public static func load(yaml: String, fileName: String, environment: [String: String]) throws(ConfigError)
        -> BrokerConfig {
        try load(yaml: yaml, fileName: fileName, baseDirectory: nil, environment: environment)
    }

    static func load(yaml: String, fileName: String, baseDirectory: String?,
                     environment: [String: String], listen: String? = nil) throws(ConfigError) -> BrokerConfig {
        var problems = ConfigProblemList(file: fileName)
        var draft = ConfigDraft()
        do {
            if let root = try Yams.compose(yaml: yaml) {
                ConfigDocumentDecoder(environment: environment, baseDirectory: baseDirectory)
                    .decode(root, into: &draft, problems: &problems)
            }
        } catch {
            let problem = syntaxProblem(error, yaml: yaml)
            problems.add("", problem.message, line: problem.line)
        }
        problems.file = nil
        applyEnvironment(environment, to: &draft, problems: &problems)
        if let listen { applyFlag("--listen", setting: "server.listen", listen, to: &draft, problems: &problems) }
        if draft.state.postgres.password == nil {
            draft.state.postgres.password = defaultPostgresPassword(environment, baseDirectory: baseDirectory, problems: &problems)
        }
        let filesRead = draft.resolveStateKeys(environment: environment, baseDirectory: baseDirectory,
                                               file: fileName)
            + draft.resolveAdminToken(environment: environment, baseDirectory: baseDirectory, file: fileName)
            + draft.resolveTLSFiles(baseDirectory: baseDirectory, file: fileName)
        // File problems in line order (a mapping's unknown keys are found before its values are
        // read), then environment problems; the sort is stable.
        let all = (problems.problems + draft.crossCheck(file: fileName) + filesRead).sorted {
            ($0.file == nil ? 1 : 0, $0.line ?? 0) < ($1.file == nil ? 1 : 0, $1.line ?? 0)
        }
        guard all.isEmpty else { throw ConfigError(problems: all) }
        return draft.finish()
    }

    /// The PostgreSQL password when the file names none: `BROKER_POSTGRES_PASSWORD`, or the file
    /// `BROKER_POSTGRES_PASSWORD_FILE` names (a Compose or Kubernetes secret), not both.
    private static func defaultPostgresPassword(_ environment: [String: String], baseDirectory: String?,
                                                problems: inout ConfigProblemList) -> Secret? {
        let variable = PostgresSettings.defaultPasswordVariable
        let fileVariable = PostgresSettings.defaultPasswordFileVariable
        let value = environment[variable].flatMap { $0.isEmpty ? nil : $0 }
        let path = environment[fileVariable].flatMap { $0.isEmpty ? nil : $0 }
        switch (value, path) {
        case (let value?, nil):
            return Secret(value, source: "env \(variable)")
        case (nil, let path?):
            switch SecretReference.file(path).resolve(environment: environment, baseDirectory: baseDirectory) {
            case .success(let secret): return secret
            case .failure(let error): problems.add(fileVariable, error.message, line: nil)
            }
        case (.some, .some):
            problems.add(fileVariable, "set \(variable) or \(fileVariable), not both", line: nil)
        case (nil, nil):
            break
        }
        return nil
    }

    /// One problem for a YAML syntax error, with its line and without quoting the document.
    static func syntaxProblem(_ error: any Error, yaml: String) -> (message: String, line: Int?) {
        guard let error = error as? YamlError else { return ("invalid YAML", nil) }
        switch error {
        case .scanner(let context, let problem, let mark, _),
             .parser(let context, let problem, let mark, _),
             .composer(let context, let problem, let mark, _):
            let detail = context.map { " (\($0.text))" } ?? ""
            return ("invalid YAML: \(problem)\(detail)", mark.line)
        case .reader(let problem, let offset, _, _):
            let line = offset.map { offset in yaml.utf8.prefix(offset).reduce(1) { $1 == 10 ? $0 + 1 : $0 } }
            return ("invalid YAML: \(problem)", line)
        case .duplicatedKeysInMapping(let duplicates, let context):
            return ("duplicate key \(duplicates.joined(separator: ", ")) in a mapping", context.mark.line)
        default:
            return ("invalid YAML", nil)
        }
    }
}
