import BuildStamp

/// The version and commit printed by `token-broker version` and `--version`, logged at start and
/// exported as `broker_build_info{version,commit}`.
public enum BuildInfo {
    public static let version = "0.1.0"
    /// The commit the build named (`BROKER_COMMIT`), else "unknown".
    public static let commit: String = {
        let named = String(cString: broker_build_commit())
        return named.isEmpty ? "unknown" : named
    }()
}
