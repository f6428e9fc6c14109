public import WireValues

/// What the HTTP server needs to know: where to listen and its limits.
///
/// It has no defaults: every value comes from the broker's one configuration model, which alone
/// writes the defaults, so that the server cannot run on a default the configuration does not
/// state.
public struct ServerConfiguration: Sendable {
    /// An IPv4 or IPv6 literal.
    public var host: String
    /// 0 picks a free port (see `HTTPServer.port`).
    public var port: UInt16
    /// Request threads, at least 1 (the configuration resolves "one per core").
    public var threads: Int
    /// Bodies larger than this get 413.
    public var maxBodyBytes: Int
    /// Request headers (names and values) larger than this get 431.
    public var maxHeaderBytes: Int
    /// Request targets (path and query) longer than this get 414.
    public var maxURLBytes: Int
    /// Connections beyond this get 503 and are closed.
    public var maxConnections: Int
    /// Connections from one client IP beyond this get 503 and are closed.
    public var maxConnectionsPerIP: Int
    /// Idle connections are closed after this many seconds.
    public var idleTimeoutSeconds: Int
    /// A request head must arrive within this many seconds of the connection's opening or of
    /// the end of its previous request; a body within as many seconds of its head plus one
    /// second per `requestBodyMinBytesPerSecond` bytes. Slower connections are closed.
    public var requestHeadTimeoutSeconds: Int
    /// The rate a body must keep up, in bytes per second; 0: bodies have no deadline.
    public var requestBodyMinBytesPerSecond: Int
    /// Browser origins (`https://app.example.com`, lowercased) allowed to read answers (CORS).
    public var corsOrigins: Set<String>
    /// Paths under these prefixes never answer CORS, whatever the origin (routes no web page
    /// may call, such as an admin API sharing the listener).
    public var corsClosedPrefixes: [String] = []
    /// Reverse proxies whose `X-Forwarded-For` names the client (`Request.clientIP`); empty: the
    /// client is the connection's address. Connection limits always count the connection's.
    public var trustedProxies: [IPNetwork]
    /// PEM certificate chain and private key: serve HTTPS. Nil: plain HTTP (TLS terminated in front).
    public var tls: (certificate: String, key: String)?

    public init(
        host: String,
        port: UInt16,
        threads: Int,
        maxBodyBytes: Int,
        maxHeaderBytes: Int,
        maxURLBytes: Int,
        maxConnections: Int,
        maxConnectionsPerIP: Int,
        idleTimeoutSeconds: Int,
        requestHeadTimeoutSeconds: Int,
        requestBodyMinBytesPerSecond: Int,
        corsOrigins: Set<String>,
        trustedProxies: [IPNetwork],
        tls: (certificate: String, key: String)?
    ) {
        precondition(threads >= 1, "threads must be resolved to at least 1 by the configuration")
        self.host = host
        self.port = port
        self.threads = threads
        self.maxBodyBytes = maxBodyBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxURLBytes = maxURLBytes
        self.maxConnections = maxConnections
        self.maxConnectionsPerIP = maxConnectionsPerIP
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.requestHeadTimeoutSeconds = requestHeadTimeoutSeconds
        self.requestBodyMinBytesPerSecond = requestBodyMinBytesPerSecond
        self.corsOrigins = corsOrigins
        self.trustedProxies = trustedProxies
        self.tls = tls
    }

    /// libmicrohttpd's own per-connection memory. It is set above the header and URL limits so
    /// that the server, not libmicrohttpd, answers an oversized request, in JSON; libmicrohttpd's
    /// plain 414/431 remains the backstop for grossly oversized ones. Not larger: libmicrohttpd
    /// clears the pool for every request on a kept-alive connection.
    var connectionMemoryBytes: Int {
        maxHeaderBytes + maxURLBytes + 16 * 1024
    }

    /// libmicrohttpd's hard cap, past which it closes sockets without a word: above the limit
    /// the server enforces, so that clients over it get a 503 first.
    var hardConnectionLimit: Int {
        maxConnections + max(64, maxConnections / 8)
    }
}
