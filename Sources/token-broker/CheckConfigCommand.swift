import ArgumentParser
import BrokerCore
import Foundation

/// `token-broker check-config FILE`: the same verdict the broker reaches at start, without
/// starting it (the configuration, then ``StartChecks``: a state key, secret files others can
/// read); with `--discovery`, also each provider's discovery document against what its
/// configuration relies on.
struct CheckConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file (with the current environment) and exit non-zero on error.",
        discussion: """
            With --discovery, the discovery document of every provider configured by issuer is \
            fetched and checked too: private_key_jwt listed in token_endpoint_auth_methods_supported \
            when the provider uses it, a pushed_authorization_request_endpoint when par is required, \
            and par not off when the provider requires pushed authorization requests.
            """
    )

    @Argument(help: "The configuration file (YAML).")
    var file: String

    @Flag(help: "Also fetch each issuer's discovery document and check the provider against it (needs the network).")
    var discovery = false

    @Flag(help: "Check it as `serve --dev` would start it (no state key needed; loopback only). Also $BROKER_DEV=true.")
    var dev = false

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let config: BrokerConfig
        let development: Bool
        do {
            development = try dev || ConfigLoader.developmentMode(environment: environment)
            config = try ConfigLoader.load(path: file, environment: environment)
        } catch {
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            throw ExitCode(1)
        }
        let refusals = StartChecks.refusals(config, development: development)
        guard refusals.isEmpty else {
            FileHandle.standardError.write(Data(refusals.map { "\(file): serve would not start: \($0)\n" }.joined().utf8))
            throw ExitCode(1)
        }
        for warning in StartChecks.warnings(config) {
            FileHandle.standardError.write(Data("\(file): warning: \(warning)\n".utf8))
        }
        if discovery {
            let problems = await DiscoveryCheck.problems(config)
            guard problems.isEmpty else {
                FileHandle.standardError.write(Data(problems.map { "\(file): \($0)\n" }.joined().utf8))
                throw ExitCode(1)
            }
        }
        let checked = discovery ? ", discovery documents checked" : ""
        print("\(file): OK (\(config.providers.count) providers, \(config.apps.count) apps, listen \(config.server.listen)\(checked))")
        // What to register at each OpenID Connect provider for back-channel logout.
        for (provider, url) in config.backChannelLogoutURLs {
            print("\(provider): back-channel logout URI \(url.absoluteString)")
        }
        for provider in config.providers {
            guard let signer = provider.clientAssertionSigner else { continue }
            print("providers.\(provider.id): private_key_jwt with kid \(signer.signingKey.keyID); register the client's jwks_uri as "
                + config.server.clientKeysURL(of: provider.id).absoluteString)
        }
    }
}
