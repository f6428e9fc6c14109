import BrokerCrypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
public import Logging

/// The broker assembled from its configuration: the HTTP server, its routes, metrics, logging
/// and the provider calls. The executable creates one, starts it, and shuts it down on a signal.
public final class Broker: Sendable {
    public let config: BrokerConfig
    public let logger: Logger
    public let metrics: BrokerMetrics
    private let server: HTTPServer
    private let router: Router

    /// Binds the listening socket and builds everything that serves on it. With `development`,
    /// the built-in identity provider and demo app are added (loopback only).
    public init(config: BrokerConfig, development: Bool = false, logOutput: LogOutput = .standardOutput) async throws(BrokerStartError) {
        let style: LogLineHandler.Style =
            config.log.format.resolved(stdoutIsTerminal: isatty(STDOUT_FILENO) == 1) == .json ? .json : .text
        let level = Logger.Level(rawValue: config.log.level.rawValue) ?? .info
        let logger = Logger(label: "token-broker") { label in
            LogLineHandler(label: label, level: level, style: style, output: logOutput)
        }
        let metrics = BrokerMetrics()
        var config = config
        if development, let refusal = DevelopmentMode.refusal(config) { throw BrokerStartError(refusal) }
        let server: HTTPServer
        do {
            server = try HTTPServer(
                configuration: Self.serverConfiguration(config.server),
                observer: RequestReporter(metrics: metrics, logger: logger, accessLog: config.log.access)
            )
        } catch {
            throw BrokerStartError(error.description)
        }
        if config.server.publicURLIsDerived {
            // With port 0 the public URL (and the callback URL providers see) takes the real port.
            config.server.publicURL = ListenAddress(host: config.server.listen.host, port: server.port).derivedPublicURL
        }
        var router = Router()
        if development {
            let secret = Base64URL.encode(SecureRandom.bytes(count: 32))
            do {
                config = try DevelopmentMode.configure(config, clientSecret: secret)
            } catch {
                throw BrokerStartError(error.description)
            }
            let now: @Sendable () -> Double = { Date().timeIntervalSince1970 }
            DevelopmentProvider(
                issuer: DevelopmentMode.issuer(of: config).absoluteString, callbackURL: config.server.callbackURL.absoluteString,
                clientSecret: secret, signer: await DevelopmentSigner.make(), now: now
            ).register(in: &router)
        }
        let upstream = UpstreamClient()
        let discovery = DiscoveryCache(client: upstream)
        let providers = ProviderDirectory(providers: config.providers, discovery: discovery)
        let services = Self.services(config, providers: providers, upstream: upstream, logger: logger)
        AuthorizeRoutes(services: services).register(in: &router)
        CallbackRoute(services: services).register(in: &router)
        TokenRoutes(services: services).register(in: &router)
        SessionRoutes(services: services).register(in: &router)
        let issuers = config.providers.compactMap { provider -> (provider: String, issuer: URL)? in
            guard case .discovery(let issuer) = provider.endpoints else { return nil }
            return (provider.id, issuer)
        }
        OperationsRoutes(readiness: Readiness(issuers: issuers, discovery: discovery), metrics: metrics).register(in: &router)
        self.config = config
        self.logger = logger
        self.metrics = metrics
        self.server = server
        self.router = router
    }

    private static func services(_ config: BrokerConfig, providers: ProviderDirectory, upstream: UpstreamClient, logger: Logger) -> BrokerServices {
        let now: @Sendable () -> Double = { Date().timeIntervalSince1970 }
        let sessions = SessionStore()
        let calls = ProviderCalls(client: upstream)
        return BrokerServices(
            config: config,
            providers: providers,
            calls: calls,
            sessions: sessions,
            flows: FlowStore(),
            refresher: Refresher(sessions: sessions, providers: providers, calls: calls, logger: logger, now: now),
            idTokens: IDTokenVerifier(jwks: JWKSCache(client: upstream)),
            profiles: ProfileCache(lifetime: 60),
            logger: logger,
            now: now
        )
    }

    /// The bound port.
    public var port: UInt16 { server.port }

    /// Starts serving.
    public func start() throws(BrokerStartError) {
        do {
            try server.start(router: router)
        } catch {
            throw BrokerStartError(error.description)
        }
        logger.notice("listening", metadata: [
            "address": "\(config.server.listen.host):\(server.port)",
            "public_url": "\(config.server.publicURL.absoluteString)",
            "threads": "\(config.server.threads)",
            "providers": "\(config.providers.map(\.id).joined(separator: ","))",
            "apps": "\(config.apps.map(\.id).joined(separator: ","))",
        ])
    }

    /// Stops accepting, lets pending requests finish within the configured grace period, and
    /// closes everything.
    public func shutdown() async {
        logger.notice("shutting down", metadata: ["grace_seconds": "\(config.server.shutdownGraceSeconds)"])
        let cutShort = await server.shutdown(grace: .seconds(config.server.shutdownGraceSeconds))
        logger.notice("stopped", metadata: ["requests_cut_short": "\(cutShort)"])
    }

    static func serverConfiguration(_ server: ServerConfig) -> ServerConfiguration {
        let limits = server.limits
        return ServerConfiguration(
            host: server.listen.host == "localhost" ? "127.0.0.1" : server.listen.host,
            port: server.listen.port,
            threads: server.threads,
            maxBodyBytes: limits.maxBodyBytes,
            maxHeaderBytes: limits.maxHeaderBytes,
            maxURLBytes: limits.maxURLBytes,
            maxConnections: limits.maxConnections,
            maxConnectionsPerIP: limits.maxConnectionsPerIP,
            idleTimeoutSeconds: limits.idleTimeoutSeconds
        )
    }
}

/// Why the broker could not start.
public struct BrokerStartError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
