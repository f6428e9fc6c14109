/// One thing wrong with the configuration: where it is and what is wrong.
///
/// A problem never quotes a secret: messages name keys, environment variables and file paths,
/// never the values they lead to.
public struct ConfigProblem: Sendable, Equatable, CustomStringConvertible {
    /// Dotted path of the offending key, such as `providers.corp.client_id` or
    /// `apps.demo.redirect_uris[1]`; for an environment override, the variable's name
    /// (`BROKER_THREADS`); empty when the problem concerns the whole document.
    public var key: String
    /// A human sentence saying what is wrong and, where possible, how to fix it.
    public var message: String
    /// The 1-based line in the configuration file, when known.
    public var line: Int?
    /// The configuration file the problem was found in; `nil` for environment overrides.
    public var file: String?

    /// Creates a problem.
    public init(key: String, message: String, line: Int? = nil, file: String? = nil) {
        self.key = key
        self.message = message
        self.line = line
        self.file = file
    }

    /// `FILE:LINE: KEY: MESSAGE`, leaving out the parts that are not known.
    public var description: String {
        var location = ""
        if let file {
            location = file
            if let line { location += ":\(line)" }
        } else if let line {
            location = "line \(line)"
        }
        var parts: [String] = []
        if !location.isEmpty { parts.append(location) }
        if !key.isEmpty { parts.append(key) }
        parts.append(message)
        return parts.joined(separator: ": ")
    }
}

/// The configuration could not be loaded. Carries every problem found in one pass, so that an
/// operator can fix them all before the next start.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    /// Every problem found: those in the file by line, then those in environment overrides.
    /// Never empty.
    public var problems: [ConfigProblem]

    /// Creates an error from a non-empty list of problems.
    public init(problems: [ConfigProblem]) {
        self.problems = problems
    }

    /// Creates an error holding a single problem.
    public init(key: String, message: String, line: Int? = nil, file: String? = nil) {
        self.problems = [ConfigProblem(key: key, message: message, line: line, file: file)]
    }

    /// One problem per line, each as `FILE:LINE: KEY: MESSAGE`.
    public var description: String {
        problems.map(\.description).joined(separator: "\n")
    }
}
