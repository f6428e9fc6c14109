import Foundation
import Logging

/// What the API handlers share: the configuration, the flow services they call, the rate limits
/// at the door, and the store, read to authenticate a bearer session token.
struct BrokerServices: Sendable {
    let config: BrokerConfig
    let providers: ProviderDirectory
    let login: LoginFlow
    let sessions: SessionOperations
    let devices: DeviceFlow
    let proxy: APIProxy
    let store: any StateStore
    let loginLimiter: RateLimiter
    let tokenLimiter: RateLimiter
    /// `POST /refresh`, and `GET /token` when it would refresh.
    let refreshLimiter: RateLimiter
    /// User codes entered at `/device`, per client.
    let deviceEntryLimiter: RateLimiter
    /// Wrong user codes entered at `/device`: per client, per network and for all clients.
    let userCodeGuard: UserCodeGuard
    /// Proxied API requests, per session.
    let proxyLimiter: RateLimiter
    /// Tags that bind a browser to the device pages and to a device login.
    let binding: BrowserBinding
    /// Where events go, when a webhook is configured.
    let webhooks: WebhookSender?
    let metrics: BrokerMetrics
    let logger: Logger
    /// Unix seconds now; replaceable in tests.
    let now: BrokerClock

    /// Refresh access tokens that expire within this many seconds (AppAuth's 60 s by default).
    var refreshSkew: Double { sessions.refreshSkew }

    /// The cookie that binds a device login to the browser that began it.
    var deviceLoginCookie: DeviceLoginCookie {
        DeviceLoginCookie(secure: config.server.publicURL.scheme == "https", binding: binding,
                          lifetimeSeconds: config.sessions.loginLifetimeSeconds)
    }
}
