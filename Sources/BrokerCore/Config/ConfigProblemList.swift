/// Collects problems during one load so that all of them are reported together.
struct ConfigProblemList: Sendable {
    /// The problems found so far.
    private(set) var problems: [ConfigProblem] = []
    /// The file that problems found from now on belong to; `nil` for environment overrides.
    var file: String?

    /// Whether nothing has gone wrong so far.
    var isEmpty: Bool { problems.isEmpty }

    /// Records a problem at `key`.
    mutating func add(_ key: ConfigKeyPath, _ message: String, line: Int?) {
        add(key.description, message, line: line)
    }

    /// Records a problem under a raw key (an environment variable's name, say).
    mutating func add(_ key: String, _ message: String, line: Int?) {
        problems.append(ConfigProblem(key: key, message: message, line: line, file: file))
    }

    /// Records a rejected value at `key`.
    mutating func add(_ key: ConfigKeyPath, _ invalid: ConfigValueError, line: Int?) {
        add(key, invalid.message, line: line)
    }

    /// Unwraps a parse result, recording the failure at `key` and answering `nil` for it.
    mutating func check<T>(_ result: Result<T, ConfigValueError>, at key: ConfigKeyPath, line: Int?) -> T? {
        switch result {
        case .success(let value):
            return value
        case .failure(let invalid):
            add(key, invalid, line: line)
            return nil
        }
    }
}
