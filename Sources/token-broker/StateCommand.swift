import ArgumentParser
import BrokerCore
import Foundation

/// `token-broker state inspect`: what the state directory or the PostgreSQL store holds, without changing it;
/// `state migrate` and `state import` for the PostgreSQL store.
struct StateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state",
        abstract: "Look at the broker's state, migrate its PostgreSQL schema, or import state files into PostgreSQL.",
        subcommands: [Inspect.self, Migrate.self, Import.self]
    )

    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "inspect",
            abstract: "Print counts, sizes and times of the state files, or of the PostgreSQL store's rows (never a secret); exit non-zero where a start would stop: a damaged, unreadable or missing file, or one the keys do not open."
        )

        @Option(name: .long, help: "The configuration file (for the state settings and the keys). Default: $BROKER_CONFIG, else defaults.")
        var config: String?

        func run() async throws {
            let settings = try StateCommand.load(config)
            if settings.state.backend == .postgres {
                try await StateCommand.report { () async throws(PostgresMaintenance.Failure) in try await PostgresInspection.describe(settings) }
                return
            }
            do {
                print(try StateInspection.describe(settings.state))
            } catch {
                FileHandle.standardError.write(Data("token-broker: \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
    }

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate",
            abstract: "Bring the PostgreSQL store's schema up to date (brokers also do it at start); exit non-zero if it cannot be."
        )

        @Option(name: .long, help: "The configuration file. Default: $BROKER_CONFIG, else defaults.")
        var config: String?

        func run() async throws {
            let settings = try StateCommand.load(config)
            try await StateCommand.report { () async throws(PostgresMaintenance.Failure) in try await PostgresMaintenance.migrate(settings) }
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract: "Copy the live sessions of an embedded state directory into the PostgreSQL store (run with no broker on the directory)."
        )

        @Option(name: .long, help: "The configuration file (state.backend postgres, and the keys the directory was written with).")
        var config: String?

        @Option(name: .long, help: "The embedded state directory to copy from.")
        var from: String

        func run() async throws {
            let settings = try StateCommand.load(config)
            let directory = from
            try await StateCommand.report { () async throws(PostgresMaintenance.Failure) in
                try await PostgresMaintenance.importDirectory(directory, into: settings)
            }
        }
    }

    /// Prints what `work` did, or its failure on standard error with exit status 1.
    static func report(_ work: () async throws(PostgresMaintenance.Failure) -> String) async throws {
        do {
            print(try await work())
        } catch {
            FileHandle.standardError.write(Data("token-broker: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }

    /// The configuration, or exit 2 with its problems.
    static func load(_ path: String?) throws -> BrokerConfig {
        let environment = ProcessInfo.processInfo.environment
        do {
            return try ConfigLoader.load(path: ConfigLoader.path(option: path, environment: environment), environment: environment)
        } catch {
            FileHandle.standardError.write(Data("token-broker: invalid configuration\n\(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}
