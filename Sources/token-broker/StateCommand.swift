import ArgumentParser
import BrokerCore
import Foundation

/// `token-broker state inspect`: what the state directory holds, without changing it.
struct StateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state",
        abstract: "Look at the broker's state files.",
        subcommands: [Inspect.self]
    )

    struct Inspect: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "inspect",
            abstract: "Print counts, sizes and times of the state files (never a secret); exit non-zero if they are damaged."
        )

        @Option(name: .long, help: "The configuration file (for state.directory and the keys). Default: $BROKER_CONFIG, else defaults.")
        var config: String?

        func run() throws {
            let environment = ProcessInfo.processInfo.environment
            let settings: BrokerConfig
            do {
                settings = try ConfigLoader.load(path: config ?? environment["BROKER_CONFIG"], environment: environment)
            } catch {
                FileHandle.standardError.write(Data("token-broker: invalid configuration\n\(error)\n".utf8))
                throw ExitCode(2)
            }
            do {
                print(try StateInspection.describe(settings.state))
            } catch {
                FileHandle.standardError.write(Data("token-broker: \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
    }
}
