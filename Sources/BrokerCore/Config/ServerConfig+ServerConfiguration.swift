import Foundation
import HTTPServer

extension ServerConfig {
    /// What the HTTP server is given: the one place the server's settings become the transport's
    /// ``ServerConfiguration``, which has no defaults of its own. `localhost` listens on
    /// 127.0.0.1, and the TLS files are read here. The admin API, when it shares this listener,
    /// never answers CORS: no web page is its client.
    func serverConfiguration() throws(BrokerStartError) -> ServerConfiguration {
        var pem: (certificate: String, key: String)?
        if let files = tls {
            guard let certificate = try? String(contentsOfFile: files.certificateFile, encoding: .utf8),
                  let key = try? String(contentsOfFile: files.keyFile, encoding: .utf8) else {
                throw BrokerStartError("cannot read the TLS certificate or key (\(files.certificateFile), \(files.keyFile))")
            }
            pem = (certificate, key)
        }
        var configuration = ServerConfiguration(
            host: listen.host == "localhost" ? "127.0.0.1" : listen.host,
            port: listen.port,
            threads: threads,
            maxBodyBytes: limits.maxBodyBytes,
            maxHeaderBytes: limits.maxHeaderBytes,
            maxURLBytes: limits.maxURLBytes,
            maxConnections: limits.maxConnections,
            maxConnectionsPerIP: limits.maxConnectionsPerIP,
            idleTimeoutSeconds: limits.idleTimeoutSeconds,
            requestHeadTimeoutSeconds: limits.requestHeadTimeoutSeconds,
            requestBodyMinBytesPerSecond: limits.requestBodyMinBytesPerSecond,
            corsOrigins: Set(corsOrigins),
            trustedProxies: trustedProxies,
            tls: pem
        )
        configuration.corsClosedPrefixes = [AdminRoutes.pathPrefix]
        return configuration
    }
}
