import APIClient
import BrokerCrypto
import Foundation

/// Development mode: the broker runs with a built-in identity provider (`dev`) and a demo app
/// (`demo`), so that a newcomer can walk the whole flow with curl and no provider account.
/// Loopback only — listening, advertised and reached: the built-in provider signs anyone in who
/// types a name, so no public URL, no proxy, and no app but the demo app may reach it.
public enum DevelopmentMode {
    public static let providerID = "dev"
    public static let appID = "demo"
    public static let clientID = "dev-client"
    /// The demo app's redirect URI: nothing listens there; curl reads the redirect instead.
    public static let demoRedirectURI = "http://127.0.0.1/callback"

    /// What the built-in provider's routes declare: the developer and the broker call them, on a
    /// loopback listener only.
    static func policy(body: RoutePolicy.Body) -> RoutePolicy {
        RoutePolicy(caller: .developer, limit: .none(because: "development mode listens on loopback only, and signs in no real user"),
                    body: body)
    }

    /// Why development mode cannot run with `config`, or nil when it can.
    public static func refusal(_ config: BrokerConfig) -> String? {
        guard config.server.listen.isLoopback else {
            return "development mode only listens on a loopback address (127.0.0.1 or [::1]), not \(config.server.listen)"
        }
        if !config.server.publicURLIsDerived, !HostClassification.isLoopback(config.server.publicURL.host ?? "") {
            // A proxy could publish the loopback listener under this URL: every provider
            // redirect and the development provider's own pages would then be public.
            return "development mode only runs with a loopback public_url (http://127.0.0.1:PORT or http://[::1]:PORT); "
                + "unset server.public_url (BROKER_PUBLIC_URL)"
        }
        if !config.server.trustedProxies.isEmpty {
            return "development mode accepts no server.trusted_proxies (BROKER_TRUSTED_PROXIES): "
                + "its built-in provider signs anyone in and must not be reached through a proxy"
        }
        if config.provider(id: providerID) != nil || config.app(id: appID) != nil {
            return "development mode adds a provider '\(providerID)' and an app '\(appID)'; the configuration already has one"
        }
        return nil
    }

    /// `config` plus the built-in provider (found by discovery at `<public_url>/dev`, so the broker
    /// talks to it over HTTP like to any provider) and the demo app, the only app that may use it:
    /// an app of `config` without a `providers` list keeps every provider `config` has.
    static func configure(_ config: BrokerConfig, clientSecret: String) throws(ConfigError) -> BrokerConfig {
        let issuer = issuer(of: config)
        let provider = ProviderConfig(
            id: providerID,
            endpoints: .discovery(issuer: issuer),
            clientID: clientID,
            clientAuthentication: .clientSecretBasic(Secret(clientSecret, source: "development mode")),
            scopes: ["openid", "profile", "email"],
            // The proxy reaches the built-in provider's own endpoints (`/proxy/dev/userinfo`) on loopback.
            apiBaseURL: issuer, apiAllowPrivateAddresses: true, displayName: "Development identity provider"
        )
        let demo = AppConfig(id: appID, redirectURIs: [try RedirectURI(parsing: demoRedirectURI)], deviceFlow: true, displayName: "Demo app")
        let configured = config.providers.map(\.id)
        let apps = config.apps.map { app in
            AppConfig(id: app.id, redirectURIs: app.redirectURIs, providers: app.providers ?? configured, deviceFlow: app.deviceFlow,
                      displayName: app.displayName, dpop: app.dpop, dpopNonce: app.dpopNonce)
        }
        return BrokerConfig(
            server: config.server, log: config.log, sessions: config.sessions, state: config.state, webhooks: config.webhooks, admin: config.admin,
            resourceServers: config.resourceServers,
            providers: config.providers + [provider], apps: apps + [demo]
        )
    }

    /// Development mode over `config`: the configuration with the built-in provider and the demo
    /// app (a fresh client secret between them), and the routes of the provider and of its
    /// logout page, which `serve` registers with the others (``ServedRoutes``).
    static func setUp(
        _ config: BrokerConfig, upstream: UpstreamClient, now: @escaping @Sendable () -> Double
    ) throws(BrokerStartError) -> (config: BrokerConfig, routes: [@Sendable (inout RouteTable) -> Void]) {
        let secret = Base64URL.encode(SecureRandom.bytes(count: 32))
        let configured: BrokerConfig
        do {
            configured = try configure(config, clientSecret: secret)
        } catch {
            throw BrokerStartError(error.description)
        }
        let signer: DevelopmentSigner
        do {
            signer = try DevelopmentSigner.make()
        } catch {
            throw BrokerStartError("the development provider's key could not be made: \(error)")
        }
        let issuer = issuer(of: configured).absoluteString
        let provider = DevelopmentProvider(issuer: issuer, callbackURL: configured.server.callbackURL.absoluteString,
                                           clientSecret: secret, signer: signer, now: now)
        var routes: [@Sendable (inout RouteTable) -> Void] = [provider.register]
        if let logoutURL = configured.backChannelLogoutURLs.first(where: { $0.provider == providerID })?.url {
            routes.append(DevelopmentLogout(issuer: issuer, backChannelLogoutURL: logoutURL, signer: signer, client: upstream, now: now).register)
        }
        return (configured, routes)
    }

    static func issuer(of config: BrokerConfig) -> URL {
        config.server.publicURL.appendingPathComponent(providerID)
    }
}
