import Foundation

/// What a start needs beyond a valid configuration, written once for `serve` and `check-config`
/// so that a configuration `check-config` passes is one `serve` starts with.
///
/// A refusal stops a start for good: no retry can succeed, so `serve` exits 2, which the systemd
/// unit does not restart. A warning is logged at start and printed by `check-config`: secret files
/// other users can read (a container runtime often mounts secrets 0444 in a container with no
/// other user, so a warning, not a refusal).
public enum StartChecks {
    /// Why `serve` cannot start with `config`; empty when it can.
    public static func refusals(_ config: BrokerConfig, development: Bool) -> [String] {
        if development {
            return DevelopmentMode.refusal(config).map { [$0] } ?? []
        }
        return config.state.keys == nil ? [noStateKey(config.state)] : []
    }

    /// Every secret file of `config` that other users can read: the state key, the TLS private
    /// key, the providers' client secrets and private keys, the admin token, the database
    /// password, the webhook secret, the resource servers' secrets.
    public static func warnings(_ config: BrokerConfig) -> [String] {
        var files: [(name: String, path: String)] = []
        if let keyFile = config.state.keyFile { files.append(("the state key file", keyFile)) }
        if let tls = config.server.tls { files.append(("the TLS private key file", tls.keyFile)) }
        for provider in config.providers {
            if let file = provider.clientSecret?.file { files.append(("the client secret file of provider \(provider.id)", file)) }
        }
        if let file = config.admin?.token?.file { files.append(("the admin token file", file)) }
        if let file = config.state.postgres.password?.file { files.append(("the PostgreSQL password file", file)) }
        if let file = config.webhooks?.secret.file { files.append(("the webhook secret file", file)) }
        for server in config.resourceServers {
            if let file = server.credential.secretFile { files.append(("the secret file of resource server \(server.id)", file)) }
        }
        return files.compactMap { FilePermissions.othersCanRead($0.path, name: "\($0.name) \($0.path)") }
            + ClientKeyPermissions.check(config.providers)
    }

    private static func noStateKey(_ state: StateSettings) -> String {
        let advice = "or run with --dev for development (sessions then live in memory only)"
        if let keyFile = state.keyFile {
            return "no state key: the state key file \(keyFile) does not exist. Sessions are kept encrypted and the broker will not "
                + "start without a key: write the output of `token-broker gen-key` to it, \(advice)."
        }
        let variable = state.keySource.replacingOccurrences(of: "env ", with: "")
        return "no state key: \(variable) is not set. Sessions are kept encrypted and the broker will not start without a key: "
            + "set it to the output of `token-broker gen-key` (or use state.key_file), \(advice)."
    }
}
