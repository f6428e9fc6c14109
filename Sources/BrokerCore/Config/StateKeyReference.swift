import Foundation

/// Where the state keys are to be found: `state.key_env` (the default, `BROKER_STATE_KEY`) or
/// `state.key_file`.
enum StateKeyReference: Sendable, Equatable {
    case environment(String)
    case file(String)

    /// The keys of the `state` section that name the reference.
    static let configKeys = ["key_env", "key_file"]

    /// `env NAME` or `file PATH`, the path made absolute as ``resolve(environment:baseDirectory:)``
    /// reads it.
    func source(baseDirectory: String?) -> String {
        switch self {
        case .environment(let name): "env \(name)"
        case .file(let path): "file \(SecretReference.absolutePath(path, baseDirectory: baseDirectory))"
        }
    }

    /// Reads the keys now. An unset or empty variable, or a file that does not exist, answers
    /// `nil`: whether the broker may run without keys is decided where it starts. A value that is
    /// there but wrong, or a file that exists but cannot be read, is a failure naming the
    /// variable or path and the position of each bad key, never a key.
    ///
    /// - Parameter baseDirectory: where a relative file path is resolved from.
    func resolve(environment: [String: String], baseDirectory: String?) -> Result<StateKeys?, ConfigValueError> {
        switch self {
        case .environment(let name):
            guard let value = environment[name], !value.isEmpty else { return .success(nil) }
            return Self.parse(value, from: "environment variable \(name)")
        case .file(let path):
            let fullPath = SecretReference.absolutePath(path, baseDirectory: baseDirectory)
            guard FileManager.default.fileExists(atPath: fullPath) else { return .success(nil) }
            return SecretReference.readText(fullPath, what: "state key file").flatMap { Self.parse($0, from: "state key file \(fullPath)") }
        }
    }

    private static func parse(_ text: String, from origin: String) -> Result<StateKeys?, ConfigValueError> {
        StateKeys.parse(text)
            .map { $0 }
            .mapError { ConfigValueError("\(origin): \($0.message)") }
    }
}
