import HTTPServer
import Logging

/// Turns the server's request reports into metrics and access-log lines.
struct RequestReporter: RequestObserver {
    let metrics: BrokerMetrics
    let logger: Logger
    let accessLog: Bool

    func requestStarted() {
        metrics.requestStarted()
    }

    func requestFinished(_ record: RequestRecord) {
        metrics.requestFinished(route: record.route, method: record.method, status: record.status, seconds: record.seconds)
        guard accessLog else { return }
        // The path only: query strings and bodies carry codes and tokens and are never logged.
        logger.info("request", metadata: [
            "request_id": "\(record.requestID)",
            "method": "\(record.method)",
            "path": "\(record.path)",
            "status": "\(record.status)",
            "duration_ms": "\((record.seconds * 1e6).rounded() / 1e3)",
            "bytes": "\(record.responseBytes)",
            "client": "\(record.clientIP)",
        ])
    }

    func serverMessage(_ message: String) {
        logger.warning("libmicrohttpd: \(message)")
    }
}
