import ArgumentParser
import BrokerCore
import Foundation

/// `token-broker check-config FILE`: the same verdict the broker reaches at start, without
/// starting it.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file (with the current environment) and exit non-zero on error."
    )

    @Argument(help: "The configuration file (YAML).")
    var file: String

    func run() throws {
        do {
            let config = try ConfigLoader.load(path: file, environment: ProcessInfo.processInfo.environment)
            print("\(file): OK (\(config.providers.count) providers, \(config.apps.count) apps, listen \(config.server.listen))")
            // What to register at each OpenID Connect provider for back-channel logout.
            for (provider, url) in config.backChannelLogoutURLs {
                print("\(provider): back-channel logout URI \(url.absoluteString)")
            }
        } catch {
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}
