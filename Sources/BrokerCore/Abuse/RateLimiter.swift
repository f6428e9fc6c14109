import Synchronization
import WireValues

/// Requests per client per minute (an IPv4 address, or an IPv6 /64: `ClientKey`), as token
/// buckets: a client may burst up to the limit and regains one request every `60 / limit`
/// seconds. Beyond it, the client is told when to come back (`admit`: 429 with `Retry-After`).
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    private let perMinute: Int
    private let buckets = Mutex<[String: Bucket]>([:])

    /// `perMinute` 0 means no limit.
    init(perMinute: Int) {
        self.perMinute = perMinute
    }

    /// Takes one request from `client`'s bucket: nil when it had one, otherwise the seconds
    /// until it will.
    func take(_ client: String, now: Double) -> Double? {
        bucket(client, now: now, taking: true)
    }

    /// Whether `client`'s bucket has a request now, without taking it: nil when it has, otherwise
    /// the seconds until it will.
    func wait(_ client: String, now: Double) -> Double? {
        bucket(client, now: now, taking: false)
    }

    private func bucket(_ client: String, now: Double, taking: Bool) -> Double? {
        guard perMinute > 0 else { return nil }
        let capacity = Double(perMinute)
        let rate = capacity / 60
        let key = ClientKey.of(client)
        return buckets.withLock { buckets in
            if buckets.count > 100_000 {
                // Forget full buckets: a client that stayed away long enough starts afresh anyway.
                buckets = buckets.filter { $0.value.tokens + (now - $0.value.updated) * rate < capacity }
            }
            var bucket = buckets[key] ?? Bucket(tokens: capacity, updated: now)
            bucket.tokens = min(capacity, bucket.tokens + (now - bucket.updated) * rate)
            bucket.updated = now
            defer { buckets[key] = bucket }
            guard bucket.tokens >= 1 else { return (1 - bucket.tokens) / rate }
            if taking { bucket.tokens -= 1 }
            return nil
        }
    }
}
