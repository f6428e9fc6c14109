public import Foundation
public import WireValues

/// HTTP server settings: the `server` section.
public struct ServerConfig: Sendable, Equatable {
    /// Address and port to listen on.
    public var listen: ListenAddress
    /// The broker's external base URL; the provider callback is ``callbackURL``. Defaults to
    /// `http://<listen>` (see ``publicURLIsDerived``).
    public var publicURL: URL
    /// Whether ``publicURL`` was derived from ``listen`` rather than configured. With port 0 the
    /// HTTP layer should then rebuild it from the port actually bound.
    public var publicURLIsDerived: Bool
    /// Number of request threads, already resolved: a configured 0 becomes the number of cores,
    /// so this is at least 1.
    public var threads: Int
    /// On SIGTERM, how long the broker goes on accepting and serving, with `/readyz` answering
    /// 503, before it stops accepting: the time a balancer or Kubernetes takes to stop sending it
    /// requests. 0: it stops accepting at once.
    public var shutdownDelaySeconds: Double
    /// On SIGTERM, once it stops accepting, how long pending requests get to finish, in seconds.
    public var shutdownGraceSeconds: Double
    /// Request and connection limits.
    public var limits: Limits
    /// Browser origins allowed to call the API (CORS); empty: none.
    public var corsOrigins: [String]
    /// Reverse proxies whose `X-Forwarded-For` is believed; empty: none.
    public var trustedProxies: [IPNetwork]
    /// PEM files to serve HTTPS with (certificate chain, private key); nil: plain HTTP.
    public var tls: TLSFiles?

    /// Creates server settings; the defaults are those of the embedded configuration, written
    /// here only. `publicURL` defaults to `http(s)://<listen>`. `threads` 0 means one per core and
    /// is resolved here, the one place it is: every later layer sees a positive count.
    public init(listen: ListenAddress = ListenAddress(host: "127.0.0.1", port: 8080), publicURL: URL? = nil,
                threads: Int = 0, shutdownDelaySeconds: Double = 10, shutdownGraceSeconds: Double = 10, limits: Limits = Limits(),
                corsOrigins: [String] = [], trustedProxies: [IPNetwork] = [], tls: TLSFiles? = nil) {
        self.listen = listen
        self.tls = tls
        self.publicURL = publicURL ?? listen.derivedPublicURL(secure: tls != nil)
        self.publicURLIsDerived = publicURL == nil
        self.threads = threads > 0 ? threads : ProcessInfo.processInfo.activeProcessorCount
        self.shutdownDelaySeconds = shutdownDelaySeconds
        self.shutdownGraceSeconds = shutdownGraceSeconds
        self.limits = limits
        self.corsOrigins = corsOrigins
        self.trustedProxies = trustedProxies
    }

    /// ``publicURL``'s path without a trailing `/`: empty at a host's root, `/broker` behind a
    /// proxy that serves the broker there. Where the pages' forms and links start.
    public var publicPath: String {
        var path = publicURL.path
        while path.hasSuffix("/") { path.removeLast() }
        return path
    }

    /// Where providers send the browser back: ``publicURL`` + `/callback`.
    public var callbackURL: URL { publicURL.appendingPathComponent("callback") }

    /// Where the public keys of provider `provider`'s client assertions are (`private_key_jwt`):
    /// the `jwks_uri` to register at the provider.
    public func clientKeysURL(of provider: String) -> URL {
        publicURL.appendingPathComponent("providers").appendingPathComponent(provider).appendingPathComponent("client-jwks")
    }

    /// Accepted range of `threads` (0 = one per core).
    static let threadsRange = 0...1_024
    /// Accepted range of `shutdown_grace_seconds`: up to one hour.
    static let shutdownGraceSecondsRange = 0.0...3_600.0
    /// Accepted range of `shutdown_delay_seconds`: up to ten minutes.
    static let shutdownDelaySecondsRange = 0.0...600.0
}

extension ListenAddress {
    /// `http(s)://<listen>`, the public URL used when none is configured.
    func derivedPublicURL(secure: Bool) -> URL {
        // The host is an IP literal or localhost and the port is numeric, so the URL always
        // parses; the fallback only keeps the type non-optional.
        URL(string: "\(secure ? "https" : "http")://\(self)") ?? URL(fileURLWithPath: "/")
    }
}

/// The PEM files the broker serves HTTPS with.
public struct TLSFiles: Sendable, Equatable {
    /// The certificate chain, leaf first.
    public let certificateFile: String
    /// The private key (unencrypted PEM).
    public let keyFile: String

    public init(certificateFile: String, keyFile: String) {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }
}
