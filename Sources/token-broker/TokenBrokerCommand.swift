import ArgumentParser
import BrokerCore

/// `token-broker`: the command line. `serve` is the default subcommand.
@main
struct TokenBrokerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token-broker",
        abstract: "An OAuth 2.0 / OpenID Connect token broker for thin clients.",
        discussion: """
            The broker runs the authorization-code flow with identity providers on behalf of \
            mobile apps, single-page apps and scripts, and keeps every client secret and refresh \
            token itself. Settings come from, in rising precedence: embedded defaults, the \
            configuration file, BROKER_* environment variables, command-line flags.
            """,
        version: "\(BuildInfo.version) (commit \(BuildInfo.commit))",
        subcommands: [ServeCommand.self, CheckConfigCommand.self, GenKeyCommand.self, StateCommand.self, VersionCommand.self],
        defaultSubcommand: ServeCommand.self
    )
}
