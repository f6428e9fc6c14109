import Foundation
#if canImport(Glibc)
import Glibc
#endif
public import HTTPServer
public import Logging

/// The broker assembled from its configuration: the HTTP server, its routes, metrics, logging
/// and the upstream client. The executable creates one, starts it, and shuts it down on a signal.
public final class Broker: Sendable {
    public let config: BrokerConfig
    public let logger: Logger
    public let metrics: BrokerMetrics
    private let server: HTTPServer

    public init(config: BrokerConfig, logOutput: LogOutput = .standardOutput) {
        self.config = config
        let style: LogLineHandler.Style =
            config.log.format.resolved(stdoutIsTerminal: isatty(STDOUT_FILENO) == 1) == .json ? .json : .text
        let level = Logger.Level(rawValue: config.log.level.rawValue) ?? .info
        logger = Logger(label: "token-broker") { label in
            LogLineHandler(label: label, level: level, style: style, output: logOutput)
        }
        metrics = BrokerMetrics()
        let discovery = DiscoveryCache(client: UpstreamClient())
        let issuers = config.providers.compactMap { provider -> (provider: String, issuer: URL)? in
            guard case .discovery(let issuer) = provider.endpoints else { return nil }
            return (provider.id, issuer)
        }
        var router = Router()
        OperationsRoutes(readiness: Readiness(issuers: issuers, discovery: discovery), metrics: metrics)
            .register(in: &router)
        server = HTTPServer(
            configuration: Self.serverConfiguration(config.server),
            router: router,
            observer: RequestReporter(metrics: metrics, logger: logger, accessLog: config.log.access)
        )
    }

    /// Starts serving; answers the bound port.
    @discardableResult
    public func start() throws(ServerStartError) -> UInt16 {
        let port = try server.start()
        logger.notice("listening", metadata: [
            "address": "\(config.server.listen.host):\(port)",
            "threads": "\(config.server.threads)",
            "providers": "\(config.providers.map(\.id).joined(separator: ","))",
            "apps": "\(config.apps.map(\.id).joined(separator: ","))",
        ])
        return port
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
