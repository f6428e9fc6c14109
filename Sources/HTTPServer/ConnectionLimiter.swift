import Synchronization
import WireValues

/// Counts open connections, in total and per client (an IPv6 client by its /64: `ClientKey`),
/// and admits a new one only under both limits. Requests on a connection that was not admitted
/// are answered 503 and the connection is closed.
final class ConnectionLimiter: Sendable {
    private struct Counts {
        var total = 0
        var perIP: [String: Int] = [:]
    }

    private let maxTotal: Int
    private let maxPerIP: Int
    private let counts = Mutex(Counts())

    init(maxTotal: Int, maxPerIP: Int) {
        self.maxTotal = maxTotal
        self.maxPerIP = maxPerIP
    }

    /// Admits a connection from `ip`, counting it, or refuses it without counting it.
    func open(_ ip: String) -> Bool {
        let key = ClientKey.of(ip)
        return counts.withLock { counts in
            let fromIP = counts.perIP[key, default: 0]
            guard counts.total < maxTotal, fromIP < maxPerIP else { return false }
            counts.total += 1
            counts.perIP[key] = fromIP + 1
            return true
        }
    }

    /// An admitted connection from `ip` closed.
    func close(_ ip: String) {
        let key = ClientKey.of(ip)
        counts.withLock { counts in
            counts.total -= 1
            let remaining = counts.perIP[key, default: 1] - 1
            counts.perIP[key] = remaining > 0 ? remaining : nil
        }
    }
}
