import ArgumentParser
import BrokerCore

struct VersionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "version", abstract: "Print the broker's version.")

    func run() {
        print("token-broker \(BuildInfo.version)")
    }
}
