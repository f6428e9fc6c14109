import Foundation
import Logging
import Synchronization

/// One dependency's outages as an operator hears of them, the way nginx or Envoy report an
/// upstream: one warning when it starts failing, one notice when it works again with how long it
/// was down — nothing while all is well, nor while it stays down.
final class OutageWatch: Sendable {
    private let what: String
    private let logger: Logger
    private let onFailure: @Sendable () -> Void
    private let state = Mutex<Outage?>(nil)

    private struct Outage {
        let reason: String
        let since: ContinuousClock.Instant
        var failures: Int
    }

    /// `what` names the dependency in the log lines ("the PostgreSQL state store"); `onFailure`
    /// hears every failed call (for a metric), the log only the first of an outage.
    init(_ what: String, logger: Logger, onFailure: @escaping @Sendable () -> Void = {}) {
        self.what = what
        self.logger = logger
        self.onFailure = onFailure
    }

    /// Why it is down, while it is.
    var reason: String? { state.withLock { $0?.reason } }

    /// A call to it failed for `reason`.
    func failed(_ reason: String) {
        onFailure()
        let began = state.withLock { outage -> Bool in
            if outage != nil {
                outage?.failures += 1
                return false
            }
            outage = Outage(reason: reason, since: .now, failures: 1)
            return true
        }
        if began { logger.warning("\(what) is failing", metadata: ["reason": "\(reason)"]) }
    }

    /// A call to it worked.
    func succeeded() {
        guard let ended = state.withLock({ outage -> Outage? in
            defer { outage = nil }
            return outage
        }) else { return }
        logger.notice("\(what) works again", metadata: [
            "down_seconds": .stringConvertible(((ContinuousClock.now - ended.since).seconds * 10).rounded() / 10),
            "failures": .stringConvertible(ended.failures), "reason": "\(ended.reason)",
        ])
    }
}

/// An ``OutageWatch`` for each of many dependencies of one kind (each provider's discovery
/// document, each key set), made on first use.
final class OutageWatches: Sendable {
    private let name: @Sendable (String) -> String
    private let logger: Logger
    private let watches = Mutex<[String: OutageWatch]>([:])

    /// `name` says in the log lines which dependency `key` is.
    init(logger: Logger, name: @escaping @Sendable (String) -> String) {
        self.logger = logger
        self.name = name
    }

    func callAsFunction(_ key: String) -> OutageWatch {
        watches.withLock { watches in
            if let known = watches[key] { return known }
            let made = OutageWatch(name(key), logger: logger)
            watches[key] = made
            return made
        }
    }
}
