/// The version printed by `token-broker version` and `--version`, logged at start and exported
/// as `broker_build_info{version}`.
public enum BuildInfo {
    public static let version = "0.1.0"
}
