import Foundation
import Logging

/// What the API handlers share: configuration, providers, stores and the calls they make.
struct BrokerServices: Sendable {
    let config: BrokerConfig
    let providers: ProviderDirectory
    let calls: ProviderCalls
    let store: any StateStore
    let refresher: Refresher
    let idTokens: IDTokenVerifier
    let profiles: ProfileCache
    let loginLimiter: RateLimiter
    let tokenLimiter: RateLimiter
    /// `POST /refresh`, and `GET /token` when it would refresh.
    let refreshLimiter: RateLimiter
    let metrics: BrokerMetrics
    let logger: Logger
    /// Unix seconds now; replaceable in tests.
    let now: @Sendable () -> Double

    /// Where providers send the browser back: `<public_url>/callback`.
    var callbackURL: String { config.server.callbackURL.absoluteString }

    /// Refresh access tokens that expire within this many seconds (AppAuth's 60 s by default).
    var refreshSkew: Double { config.sessions.refreshSkewSeconds }
}
