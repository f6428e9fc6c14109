import BrokerCrypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import Synchronization
import WireValues

/// Reports the audit trail (``AuditTrail``: every ended session, admin actions, provider
/// sign-outs) and sessions that keep failing to refresh, as signed JSON POSTs to the configured
/// URL. Delivery runs in the background with retries and
/// backoff: a client request never waits for it. At most `maxInFlight` deliveries talk to the
/// receiver at once; the others wait their turn, in order, rather than be refused by the client's
/// bound (a burst, such as a sweep ending a thousand sessions, once spent its retries on those
/// refusals, all together, and lost most of its events). Each retry's delay is lengthened by up
/// to half at random, so that a burst that failed does not come back as one. Events wait in
/// memory only: those still waiting when the process stops are lost.
///
/// Signature (like Stripe's): `X-Broker-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
/// "<t>.<body>" under the webhook secret>`. Receivers recompute it and reject old timestamps.
final class WebhookSender: Sendable {
    private let settings: WebhookSettings
    private let client: UpstreamClient
    private let logger: Logger
    private let metrics: BrokerMetrics
    private let pending = Atomic<Int>(0)
    /// Seconds before each retry, each lengthened by up to half at random.
    static let backoff: [Double] = [1, 2, 4, 8, 16]
    static let maxPending = 1000
    /// Deliveries talking to the receiver at once: the client's own bound.
    static let maxInFlight = 32
    private let turns = Turns(WebhookSender.maxInFlight)

    /// Nil when libcurl cannot make its client's event loop.
    init?(settings: WebhookSettings, logger: Logger, metrics: BrokerMetrics) {
        guard let client = UpstreamClient(limits: UpstreamClient.Limits(maxInFlight: Self.maxInFlight, totalTimeoutSeconds: 10)) else { return nil }
        self.settings = settings
        self.client = client
        self.logger = logger
        self.metrics = metrics
    }

    var failuresBeforeEvent: Int { settings.failuresBeforeEvent }

    /// `refresh.failing`: refreshes of a session keep failing (provider down or misconfigured).
    func refreshFailing(_ session: Session, consecutiveFailures: Int, reason: String) {
        send(type: "refresh.failing", session, [("reason", .string(reason)), ("consecutive_failures", .int(consecutiveFailures))])
    }

    /// An event of `type` with `fields` (no session of its own): an admin action's audit event.
    func event(type: String, _ fields: [(String, JSONValue)]) {
        send(type: type, fields)
    }

    private func send(type: String, _ session: Session, _ details: [(String, JSONValue)]) {
        send(type: type, [
            ("provider", .string(session.provider)),
            ("app", .string(session.app)),
            ("subject", .string(session.subject)),
        ] + details)
    }

    private func send(type: String, _ fields: [(String, JSONValue)]) {
        guard pending.wrappingAdd(1, ordering: .relaxed).newValue <= Self.maxPending else {
            pending.wrappingSubtract(1, ordering: .relaxed)
            metrics.webhookDelivery(outcome: "dropped")
            logger.error("webhook queue full; event dropped", metadata: ["type": "\(type)"])
            return
        }
        let id = "evt_" + Base64URL.encode(SecureRandom.bytes(count: 16))
        let body = JSONValue.object([
            ("id", .string(id)),
            ("type", .string(type)),
            ("created_at", .string(Timestamp.now())),
        ] + fields).serialized()
        // An event is the broker's, not the request's that caused it: its deliveries (and their
        // retries, minutes later) carry no caller's trace or request id to the webhook's receiver.
        TraceContext.$current.withValue(nil) {
            Task { [self] in
                defer { pending.wrappingSubtract(1, ordering: .relaxed) }
                await deliver(id: id, type: type, body: body)
            }
        }
    }

    private func deliver(id: String, type: String, body: [UInt8]) async {
        for attempt in 0...Self.backoff.count {
            if attempt > 0 {
                metrics.webhookDelivery(outcome: "retried")
                try? await Task.sleep(for: .seconds(Self.backoff[attempt - 1] * Double.random(in: 1...1.5)))
            }
            // Signed once its turn has come: a delivery that waited behind a burst still carries a
            // fresh timestamp, which receivers check.
            await turns.take()
            var request = URLRequest(url: settings.url)
            request.httpMethod = "POST"
            request.httpBody = Data(body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.setValue(type, forHTTPHeaderField: "X-Broker-Event")
            request.setValue(id, forHTTPHeaderField: "X-Broker-Event-Id")
            request.setValue(Self.signature(body, secret: settings.secret, time: Int(Date().timeIntervalSince1970)), forHTTPHeaderField: "X-Broker-Signature")
            let response = try? await client.send(request)
            turns.give()
            if let response, (200..<300).contains(response.status) {
                metrics.webhookDelivery(outcome: "delivered")
                return
            }
        }
        metrics.webhookDelivery(outcome: "failed")
        logger.error("webhook undelivered after retries", metadata: ["type": "\(type)", "event_id": "\(id)"])
    }

    /// Turns to talk to the receiver: `take` waits for one (in the order asked), `give` hands it
    /// to the next waiting delivery.
    private final class Turns: Sendable {
        private struct State {
            var free: Int
            var waiting: [CheckedContinuation<Void, Never>] = []
        }

        private let state: Mutex<State>

        init(_ count: Int) {
            state = Mutex(State(free: count))
        }

        func take() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let granted = state.withLock { state in
                    guard state.free > 0 else {
                        state.waiting.append(continuation)
                        return false
                    }
                    state.free -= 1
                    return true
                }
                if granted { continuation.resume() }
            }
        }

        func give() {
            let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard !state.waiting.isEmpty else {
                    state.free += 1
                    return nil
                }
                return state.waiting.removeFirst()
            }
            next?.resume()
        }
    }

    /// `t=<time>,v1=<hex HMAC-SHA256("<time>.<body>")>`.
    static func signature(_ body: [UInt8], secret: Secret, time: Int) -> String {
        let signed = Array("\(time).".utf8) + body
        let mac = HMACSHA256.authenticationCode(for: signed, key: Array(secret.reveal().utf8))
        return "t=\(time),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }
}
