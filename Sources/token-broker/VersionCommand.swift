import ArgumentParser
import BrokerCore

struct VersionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "version", abstract: "Print the broker's version and the commit it was built from.")

    func run() {
        print("token-broker \(BuildInfo.version) (commit \(BuildInfo.commit))")
    }
}
