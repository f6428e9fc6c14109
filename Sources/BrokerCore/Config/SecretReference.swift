import Foundation

/// Where a provider's client secret is to be found: `client_secret_env` or `client_secret_file`.
enum SecretReference: Sendable, Equatable {
    case environment(String)
    case file(String)

    /// The message for a `client_secret` key written inline.
    static let inlineRefusal = "inline secrets are not allowed; use client_secret_env (the name of "
        + "an environment variable holding the secret) or client_secret_file (the path of a file "
        + "holding it)"

    /// Whether `name` is a portable environment variable name.
    static func isValidVariableName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first == "_" || (first.isASCII && first.properties.isAlphabetic)
        else { return false }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ($0.isASCII && $0.properties.isAlphabetic)
            || ("0"..."9").contains($0) }
    }

    /// How a message names the variable `name`: by its name when it looks like one a person
    /// chose (capitals, digits and underscores, with an underscore or short), else without it —
    /// an unset variable named like a token is most likely the secret itself, pasted where its
    /// variable's name belongs, and a message must not print it.
    static func variable(named name: String) -> String {
        let conventional = name.count <= 64 && name.unicodeScalars.allSatisfy {
            $0 == "_" || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
        }
        guard conventional, name.contains("_") || name.count <= 12 else {
            return "the environment variable it names (not shown: it reads like a secret, not a variable's name)"
        }
        return "environment variable \(name)"
    }

    /// Reads the secret now. A file loses one trailing newline (`\n` or `\r\n`). Problems name
    /// the variable or path, never the value.
    ///
    /// - Parameter baseDirectory: where a relative file path is resolved from.
    func resolve(environment: [String: String], baseDirectory: String?) -> Result<Secret, ConfigValueError> {
        switch self {
        case .environment(let name):
            guard let value = environment[name] else {
                return .failure(ConfigValueError("\(Self.variable(named: name)) is not set"))
            }
            guard !value.isEmpty else {
                return .failure(ConfigValueError("\(Self.variable(named: name)) is empty"))
            }
            return .success(Secret(value, source: "env \(name)"))
        case .file(let path):
            let fullPath = Self.absolutePath(path, baseDirectory: baseDirectory)
            var value: String
            switch Self.readText(fullPath, what: "secret file") {
            case .success(let text): value = text
            case .failure(let error): return .failure(error)
            }
            // "\r\n" is a single Character in Swift, so one removeLast strips either ending.
            if value.last == "\n" || value.last == "\r\n" {
                value.removeLast()
            }
            guard !value.isEmpty else {
                return .failure(ConfigValueError("secret file \(fullPath) is empty"))
            }
            return .success(Secret(value, source: "file \(fullPath)", file: fullPath))
        }
    }

    /// The UTF-8 text of the file at `fullPath`, which messages call `what` ("secret file").
    static func readText(_ fullPath: String, what: String) -> Result<String, ConfigValueError> {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: fullPath)) else {
            let reason = FileManager.default.fileExists(atPath: fullPath) ? "is not a readable file" : "does not exist"
            return .failure(ConfigValueError("cannot read \(what) \(fullPath): it \(reason)"))
        }
        guard let text = String(data: data, encoding: .utf8) else {
            return .failure(ConfigValueError("\(what) \(fullPath) is not UTF-8 text"))
        }
        return .success(text)
    }

    /// `path` itself when absolute, else joined to `baseDirectory` (or the working directory).
    static func absolutePath(_ path: String, baseDirectory: String?) -> String {
        guard !path.hasPrefix("/"), let baseDirectory, !baseDirectory.isEmpty else { return path }
        return URL(fileURLWithPath: baseDirectory).appendingPathComponent(path).path
    }
}
