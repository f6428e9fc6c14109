import HTTPServer
import Logging

/// Turns the server's request reports into metrics and access-log lines.
struct RequestReporter: RequestObserver {
    let metrics: BrokerMetrics
    let logger: Logger
    /// Nil when the access log is off (or the log level is above `info`).
    let accessLog: AccessLog?
    /// libmicrohttpd's messages, which a client causes one a malformed request (the server's own,
    /// such as the watchdog's count of connections it cut, are not held back).
    let libraryMessages = MessageThrottle()

    func requestFinished(_ record: RequestRecord) {
        metrics.requestFinished(route: record.route, method: record.method, status: record.status, seconds: record.seconds)
        // The path only: query strings and bodies carry codes and tokens and are never logged.
        // A line dropped (the log's buffer is full) is counted by the log.
        accessLog?.write(record)
    }

    func serverMessage(_ message: String, fromLibrary: Bool) {
        guard fromLibrary else { return logger.warning("libmicrohttpd: \(message)") }
        guard let held = libraryMessages.admit() else { return }
        let more = held > 0 ? " (\(held) more libmicrohttpd messages were not logged before this one)" : ""
        logger.warning("libmicrohttpd: \(message)\(more)")
    }
}
