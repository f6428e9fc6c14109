import APIClient
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
public import Logging
import Synchronization

/// The broker assembled from its configuration: the HTTP server, its routes, metrics, logging
/// and the provider calls. The executable creates one, starts it, and shuts it down on a signal.
public final class Broker: Sendable {
    public let config: BrokerConfig
    public let logger: Logger
    public let metrics: BrokerMetrics
    private let server: HTTPServer
    private let router: Router
    /// The admin API's own listener and its routes, when `admin.listen` is set.
    private let admin: (server: HTTPServer, router: Router)?
    private let store: any StateStore
    private let refresher: Refresher
    /// Announces what the store's sweep ends, and delivers the revocations it queues.
    private let endings: GrantEndings
    /// The store's upkeep and the revocation queue's deliveries, while the broker serves.
    private let maintenance = Mutex<[Task<Void, Never>]>([])
    private let logOutput: LogOutput
    private let shuttingDown = ShutdownFlag()

    /// Loads the state, binds the listening socket and builds everything that serves on it.
    /// With `development`, the built-in identity provider and demo app are added (loopback
    /// only), and the state may live in memory only. `acceptDamagedState` starts even when a
    /// state file is damaged (docs/state.md).
    public init(
        config: BrokerConfig, development: Bool = false, acceptDamagedState: Bool = false,
        logOutput: LogOutput = .standardOutput
    ) async throws(BrokerStartError) {
        let style: LogLineHandler.Style =
            config.log.format.resolved(stdoutIsTerminal: isatty(STDOUT_FILENO) == 1) == .json ? .json : .text
        let level = Logger.Level(rawValue: config.log.level.rawValue) ?? .info
        let logger = Logger(label: "token-broker") { label in
            LogLineHandler(label: label, level: level, style: style, output: logOutput)
        }
        let metrics = BrokerMetrics()
        metrics.build(version: BuildInfo.version, commit: BuildInfo.commit)
        var config = config
        let refusals = StartChecks.refusals(config, development: development)
        guard refusals.isEmpty else { throw BrokerStartError(refusals.joined(separator: "\n"), permanent: true) }
        // The cheap checks that can fail (TLS files, the port) come before loading the state.
        let serverConfiguration = try config.server.serverConfiguration()
        let reporter = RequestReporter(
            metrics: metrics, logger: logger,
            accessLog: config.log.access && level <= .info ? AccessLog(output: logOutput, style: style, label: "token-broker") : nil
        )
        let server: HTTPServer
        let adminServer: HTTPServer?
        do {
            server = try HTTPServer(configuration: serverConfiguration, observer: reporter)
            adminServer = try config.admin?.listen.map { listen throws(ServerStartError) in
                var configuration = serverConfiguration
                configuration.host = listen.host == "localhost" ? "127.0.0.1" : listen.host
                configuration.port = listen.port
                // No web page is an admin client: no CORS answers on the admin listener. Its
                // proxies are its own: a local process must not write the audit trail's client.
                configuration.corsOrigins = []
                configuration.trustedProxies = config.admin?.trustedProxies ?? []
                return try HTTPServer(configuration: configuration, observer: reporter)
            }
        } catch {
            throw BrokerStartError(error.description)
        }
        let store = try await Self.openState(config, development: development, acceptDamage: acceptDamagedState, logger: logger, metrics: metrics)
        if config.server.publicURLIsDerived {
            // With port 0 the public URL (and the callback URL providers see) takes the real port.
            config.server.publicURL = ListenAddress(host: config.server.listen.host, port: server.port)
                .derivedPublicURL(secure: config.server.tls != nil)
        }
        // Every outbound call trusts the system's authorities, parsed once, and a provider's own
        // (ca_file) at its hosts.
        let trust: ProviderTrust
        do throws(CertificateAuthoritiesError) {
            trust = try ProviderTrust(config.providers)
        } catch {
            throw BrokerStartError(error.description)
        }
        guard let upstream = UpstreamClient(limits: config.server.limits.upstream, origins: trust.origins) else {
            throw BrokerStartError("libcurl could not set up the providers' HTTP client")
        }
        // Of the configuration as given (check-config reads the same), before development mode adds to it.
        for warning in StartChecks.warnings(config) {
            logger.warning("\(warning)")
        }
        // Development mode's provider and its logout page, registered with the other routes below.
        var developmentRoutes: [@Sendable (inout RouteTable) -> Void] = []
        if development {
            (config, developmentRoutes) = try DevelopmentMode.setUp(config, upstream: upstream, now: systemClock)
        }
        let discovery = DiscoveryCache(client: upstream, logger: logger)
        // A provider whose discovery document lacks what its private_key_jwt or par: required
        // rests on would start no login: the broker refuses to start instead.
        let atStart = await DiscoveryCheck.atStart(config.providers, discovery: discovery)
        for unfetched in atStart.unfetched {
            logger.warning("discovery document not fetched at start; /readyz warns until it is", metadata: ["detail": "\(unfetched)"])
        }
        guard atStart.problems.isEmpty else {
            throw BrokerStartError("the providers' discovery documents lack what their configuration relies on:\n"
                + atStart.problems.joined(separator: "\n"))
        }
        // The others' documents are fetched in the background from now, so that the first sign-in
        // does not wait for one, and /readyz (which never waits) soon shows them.
        for issuer in config.providers.compactMap(\.endpoints.issuer) { _ = discovery.withoutWaiting(issuer) }
        let providers = ProviderDirectory(providers: config.providers, discovery: discovery)
        metrics.start(providers: config.providers.map(\.id))
        let services = try BrokerServices.assemble(config, store: store, providers: providers, upstream: upstream, trust: trust,
                                                   logger: logger, metrics: metrics, now: systemClock)
        guard let transfers = APITransfers(maxInFlight: config.server.limits.proxyMaxTransfers) else {
            throw BrokerStartError("libcurl could not set up the API proxy's event loop")
        }
        let administration = SessionAdministration(store: store, sessions: services.sessions)
        var adminRoutes: AdminRoutes?
        if let settings = config.admin {
            guard adminServer != nil || settings.token != nil else {
                throw BrokerStartError("the admin API is never served on the public listener without admin.token_file")
            }
            adminRoutes = AdminRoutes(config: config, metrics: metrics, administration: administration, audit: services.endings.audit,
                                token: settings.token)
        }
        let operations = OperationsRoutes(
            readiness: Readiness(providers: config.providers.filter { $0.endpoints.issuer != nil }, discovery: discovery,
                                 stateFailure: { [store] in store.writeFailure }, stateShared: config.state.backend == .postgres,
                                 shuttingDown: shuttingDown), metrics: metrics,
            liveSessions: { [store] in store.sessionCount }, requestsInFlight: { [server] in server.activeRequests },
            connections: { [transfers, upstream] in
                let proxy = transfers.connections, providers = upstream.connections
                return [("api_proxy", proxy.opened, proxy.reused, proxy.open), ("providers", providers.opened, providers.reused, providers.open)]
            },
            droppedLogLines: { [logOutput] in logOutput.dropped($0) }
        )
        let routes = ServedRoutes(services, transfers: transfers, development: developmentRoutes, admin: adminRoutes,
                                  adminListener: adminServer != nil, operations: operations,
                                  metricsOnlyOnAdmin: config.admin?.metricsOnly ?? false)
        self.config = config
        self.logger = logger
        self.metrics = metrics
        self.server = server
        self.router = routes.api.router
        self.admin = adminServer.map { ($0, routes.admin.router) }
        self.store = store
        self.logOutput = logOutput
        refresher = services.sessions.refresher
        endings = services.endings
    }

    private static func openState(
        _ config: BrokerConfig, development: Bool, acceptDamage: Bool, logger: Logger, metrics: BrokerMetrics
    ) async throws(BrokerStartError) -> any StateStore {
        let lifetimes = config.sessions.lifetimes
        // Without a key outside development mode, StartChecks has refused the start already.
        guard let keys = config.state.keys else {
            logger.notice("development mode without a state key: sessions live in memory only and end with the process")
            return EmbeddedStateStore(lifetimes: lifetimes, clock: systemClock, logger: logger)
        }
        if config.state.backend == .postgres {
            do {
                return try await PostgresStateStore.open(
                    settings: config.state.postgres, keys: keys, lifetimes: lifetimes,
                    refreshLockWaitSeconds: config.server.limits.upstreamTimeoutSeconds + 5, clock: systemClock, logger: logger,
                    metrics: metrics
                )
            } catch {
                throw BrokerStartError(error.description, permanent: error.permanent)
            }
        }
        let store: EmbeddedStateStore
        do {
            store = try EmbeddedStateStore(
                settings: config.state, keys: keys, lifetimes: lifetimes, acceptDamage: acceptDamage,
                clock: systemClock, logger: logger, metrics: metrics
            )
        } catch {
            throw BrokerStartError(error.description, permanent: error.permanent)
        }
        for warning in StatePermissions.check(directory: config.state.directory) {
            logger.warning("\(warning)")
        }
        return store
    }

    /// The bound port.
    public var port: UInt16 { server.port }

    /// Starts serving.
    public func start() throws(BrokerStartError) {
        do {
            try server.start(router: router)
            try admin.map { admin throws(ServerStartError) in try admin.server.start(router: admin.router) }
        } catch {
            throw BrokerStartError(error.description)
        }
        if let admin {
            logger.notice("admin API listening", metadata: [
                "address": "\(config.admin?.listen?.host ?? ""):\(admin.server.port)",
                "token": "\(config.admin?.token == nil ? "none (loopback)" : "required")",
            ])
        } else if config.admin != nil {
            logger.notice("admin API on the public listener, behind its token", metadata: ["paths": "/admin/…"])
        }
        logger.notice("listening", metadata: [
            "version": "\(BuildInfo.version)", "commit": "\(BuildInfo.commit)",
            "store": "\(config.state.backend.rawValue)",
            "state_key_ids": .array(config.state.keys.map { $0.ids.map { .string(StateKeys.hex(id: $0)) } } ?? []),
            "address": "\(config.server.listen.host):\(server.port)",
            "public_url": "\(config.server.publicURL.absoluteString)",
            "threads": .stringConvertible(config.server.threads),
            "providers": .array(config.providers.map { .string($0.id) }),
            "apps": .array(config.apps.map { .string($0.id) }),
        ])
        // What expires ends as every ending does, and the revocations it leaves are delivered.
        let upkeep = Task { [store, endings] in
            await store.maintain { ended in endings.announce(ended) }
        }
        let deliveries = Task { [endings] in await endings.revocations.run() }
        maintenance.withLock { $0 = [upkeep, deliveries] }
    }

    /// The first step of a shutdown that gives balancers time to move off (SIGTERM, with
    /// `shutdown_delay_seconds`): from now on `/readyz` answers 503 and every answer closes its
    /// connection, while the broker goes on accepting and serving until ``shutdown()``.
    public func stopBeingReady() {
        shuttingDown.set()
        server.closeConnectionsAfterAnswers()
        logger.notice("shutting down: /readyz answers 503 while requests are still served", metadata: [
            "delay_seconds": .stringConvertible(config.server.shutdownDelaySeconds),
        ])
    }

    /// Stops accepting, lets pending requests finish within the configured grace period, and
    /// closes everything.
    public func shutdown() async {
        shuttingDown.set()
        logger.notice("shutting down", metadata: ["grace_seconds": .stringConvertible(config.server.shutdownGraceSeconds)])
        async let adminCutShort = admin?.server.shutdown(grace: .seconds(config.server.shutdownGraceSeconds)) ?? 0
        let cutShort = await server.shutdown(grace: .seconds(config.server.shutdownGraceSeconds)) + (await adminCutShort)
        // Refreshes still under way (their clients were answered 503) bring rotated tokens:
        // they are saved before the final snapshot, and no periodic snapshot races it.
        await refresher.drain()
        let tasks = maintenance.withLock { $0 }
        endings.revocations.stop()
        for task in tasks {
            task.cancel()
            await task.value
        }
        await store.close()
        // The log's lines are written in batches, grouped by thread: what every other thread
        // logged goes out first, so that `stopped` is the last line.
        logOutput.flush()
        logger.notice("stopped", metadata: ["requests_cut_short": .stringConvertible(cutShort)])
        logOutput.flush()
    }
}

/// Why the broker could not start.
public struct BrokerStartError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// No retry can succeed (no state key, a database schema newer than this broker): `serve`
    /// exits 2, which the systemd unit does not restart.
    public let permanent: Bool

    init(_ description: String, permanent: Bool = false) {
        self.description = description
        self.permanent = permanent
    }
}
