/// The version printed by `token-broker version` and `--version`.
enum BuildInfo {
    static let version = "0.1.0"
}
