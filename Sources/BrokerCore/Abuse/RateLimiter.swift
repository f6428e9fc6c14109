import Synchronization
import WireValues

/// Requests per client per minute (an IPv4 address, or an IPv6 /64: `ClientKey`; or another
/// key, such as ``ClientKey/site(of:)``), as token buckets: a client may burst up to the limit
/// and regains one request every `60 / limit` seconds. Beyond it, the client is told when to
/// come back (`admit`: 429 with `Retry-After`).
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    private let perMinute: Int
    private let key: @Sendable (String) -> String
    private let buckets = Mutex<[String: Bucket]>([:])
    /// Whose requests are counted, as a refusal says it ("from this address").
    let counted: String

    /// `perMinute` 0 means no limit; `key` is what a client is counted by, and `counted` how a
    /// refusal names it.
    init(perMinute: Int, key: @escaping @Sendable (String) -> String = ClientKey.of, counted: String = "from this address") {
        self.perMinute = perMinute
        self.key = key
        self.counted = counted
    }

    private enum Use {
        case look, take, charge
    }

    /// Takes one request from `client`'s bucket: nil when it had one, otherwise the seconds
    /// until it will.
    func take(_ client: String, now: Double) -> Double? {
        bucket(client, now: now, .take)
    }

    /// Whether `client`'s bucket has a request now, without taking it: nil when it has, otherwise
    /// the seconds until it will.
    func wait(_ client: String, now: Double) -> Double? {
        bucket(client, now: now, .look)
    }

    /// Whether `client` has spent nothing lately: its bucket is full (or it has none).
    func isUntouched(_ client: String, now: Double) -> Bool {
        guard perMinute > 0 else { return true }
        let capacity = Double(perMinute)
        return buckets.withLock { buckets in
            guard let bucket = buckets[key(client)] else { return true }
            return bucket.tokens + (now - bucket.updated) * capacity / 60 >= capacity
        }
    }

    /// Counts a request of `client` let through after ``wait(_:now:)`` (a limit that counts only
    /// some requests, once their outcome is known): taken even from an empty bucket, which then
    /// owes it — down to a minute's worth — so that requests let through together while the
    /// bucket had one are each paid for, and the long-run rate stays at the limit.
    func charge(_ client: String, now: Double) {
        _ = bucket(client, now: now, .charge)
    }

    private func bucket(_ client: String, now: Double, _ use: Use) -> Double? {
        guard perMinute > 0 else { return nil }
        let capacity = Double(perMinute)
        let rate = capacity / 60
        let key = key(client)
        return buckets.withLock { buckets in
            if buckets.count > 100_000 {
                // Forget full buckets: a client that stayed away long enough starts afresh anyway.
                buckets = buckets.filter { $0.value.tokens + (now - $0.value.updated) * rate < capacity }
            }
            var bucket = buckets[key] ?? Bucket(tokens: capacity, updated: now)
            bucket.tokens = min(capacity, bucket.tokens + (now - bucket.updated) * rate)
            bucket.updated = now
            defer { buckets[key] = bucket }
            if use == .charge {
                bucket.tokens = max(-capacity, bucket.tokens - 1)
                return nil
            }
            guard bucket.tokens >= 1 else { return (1 - bucket.tokens) / rate }
            if use == .take { bucket.tokens -= 1 }
            return nil
        }
    }
}
