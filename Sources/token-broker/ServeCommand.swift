import ArgumentParser
import Logging
import BrokerCore
import Foundation

/// `token-broker serve`: load the configuration, listen, and run until SIGTERM, SIGHUP or SIGINT.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the broker (the default command).",
        discussion: "Without --config (or BROKER_CONFIG) the broker runs on its embedded defaults."
    )

    @Option(name: .long, help: "The configuration file (YAML). Default: $BROKER_CONFIG, else embedded defaults.")
    var config: String?

    @Option(name: .long, help: "Listen on HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080; port 0 picks one). Overrides $BROKER_LISTEN and the file.")
    var listen: String?

    @Flag(name: .long, help: "Development mode: add a built-in identity provider ('dev') and a demo app ('demo'). Loopback addresses only. Also $BROKER_DEV=true.")
    var dev = false

    @Flag(name: .long, help: "Start even if a state file is damaged: the damaged file is kept aside and what can be read is used. Only after looking at the error.")
    var acceptDamagedState = false

    func run() async throws {
        // A standard output whose reader went away (`serve | head -1`, a log shipper that
        // restarts) makes writes fail with EPIPE, which the log counts as dropped lines; the
        // signal's default action would end the broker, unsaved, at its next line.
        signal(SIGPIPE, SIG_IGN)
        let environment = ProcessInfo.processInfo.environment
        var settings: BrokerConfig
        let development: Bool
        do {
            development = try dev || ConfigLoader.developmentMode(environment: environment)
            settings = try ConfigLoader.load(path: ConfigLoader.path(option: config, environment: environment), environment: environment, listen: listen)
        } catch {
            FileHandle.standardError.write(Data("token-broker: invalid configuration\n\(error)\n".utf8))
            throw ExitCode(2)
        }
        let signals = TerminationSignals()
        let broker: Broker
        do {
            broker = try await Broker(config: settings, development: development, acceptDamagedState: acceptDamagedState)
            try broker.start()
        } catch {
            // A start that no retry can mend exits 2, like an invalid configuration: the systemd
            // unit does not restart it; anything else (a port in use, a database down) exits 1.
            // The lines logged on the way (warnings, the state's recovery) are written first.
            LogOutput.standardOutput.flush()
            FileHandle.standardError.write(Data("token-broker: cannot start: \(error)\n".utf8))
            throw ExitCode(error.permanent ? 2 : 1)
        }
        let received = await signals.next()
        broker.logger.notice("signal received", metadata: ["signal": "\(received)"])
        // SIGTERM is an orchestrator's or a balancer's stop: serve on while they move off; SIGHUP
        // too (no reload: the broker reads its configuration at start only). A person's Ctrl-C
        // (SIGINT), or a second signal, does not wait.
        let delay = settings.server.shutdownDelaySeconds
        if received != "SIGINT", delay > 0 {
            broker.stopBeingReady()
            if let another = await signals.next(within: delay) {
                broker.logger.notice("signal received: the shutdown delay is cut short", metadata: ["signal": "\(another)"])
            }
        }
        await broker.shutdown()
        // Everything is saved and written: the process ends here rather than free its state
        // object by object on the way out of this scope (about a second with a million sessions,
        // for memory that the exit gives back at once).
        Foundation.exit(0)
    }
}
