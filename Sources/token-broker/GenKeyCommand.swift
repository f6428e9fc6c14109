import ArgumentParser
import BrokerCrypto

/// `token-broker gen-key`: a fresh state key, for BROKER_STATE_KEY or a key file.
struct GenKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gen-key",
        abstract: "Print a new random state key (32 bytes, base64).",
        discussion: """
            The state (sessions, refresh tokens) is encrypted on disk with AES-256-GCM under this key. \
            Put it in BROKER_STATE_KEY or in the file state.key_file names. To rotate, put the new key \
            first and keep the old one after it until the next snapshot has been written.
            """
    )

    func run() {
        print(SymmetricKey.generate().base64)
    }
}
