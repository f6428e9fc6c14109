import Synchronization
import WireValues

/// Counts open connections, in total and per client (an IPv6 client by its /64: `ClientKey`),
/// and admits a new one only under both limits. Requests on a connection that was not admitted
/// are answered 503 and the connection is closed; a client already holding `maxRefusedPerIP`
/// refused connections has the next ones closed at once, unanswered: a connection that sends
/// nothing holds a slot of libmicrohttpd's own limit until its deadline, and one client must not
/// hold the room that limit keeps for refusals (`ServerConfiguration.hardConnectionLimit`).
final class ConnectionLimiter: Sendable {
    /// What becomes of a new connection.
    enum Admission: Int32 {
        /// Counted; its requests are served.
        case admitted = 1
        /// Over a limit: counted as refused; its request is answered 503.
        case refused = 0
        /// Its client holds as many refused connections as it may: closed at once.
        case closed = -1
    }

    private struct Counts {
        var total = 0
        var perIP: [String: Int] = [:]
        var refusedPerIP: [String: Int] = [:]
    }

    private let maxTotal: Int
    private let maxPerIP: Int
    private let maxRefusedPerIP: Int
    private let counts = Mutex(Counts())

    /// `refusalRoom`: how many connections past `maxTotal` libmicrohttpd keeps open for their
    /// 503; a client may hold a quarter of it (and no more than `maxPerIP`), so that one client
    /// cannot fill it and leave the next ones a silent close.
    init(maxTotal: Int, maxPerIP: Int, refusalRoom: Int) {
        self.maxTotal = maxTotal
        self.maxPerIP = maxPerIP
        maxRefusedPerIP = max(1, min(maxPerIP, refusalRoom / 4))
    }

    /// Admits a connection from `ip`, counting it; or refuses it, counting it as refused while its
    /// client holds fewer refused connections than `maxRefusedPerIP`; or has it closed.
    func open(_ ip: String) -> Admission {
        let key = ClientKey.of(ip)
        return counts.withLock { counts in
            let fromIP = counts.perIP[key, default: 0]
            if counts.total < maxTotal, fromIP < maxPerIP {
                counts.total += 1
                counts.perIP[key] = fromIP + 1
                return .admitted
            }
            let refused = counts.refusedPerIP[key, default: 0]
            guard refused < maxRefusedPerIP else { return .closed }
            counts.refusedPerIP[key] = refused + 1
            return .refused
        }
    }

    /// A connection from `ip` that was admitted (or refused, not closed at once) closed.
    func close(_ ip: String, admitted: Bool) {
        let key = ClientKey.of(ip)
        counts.withLock { counts in
            if admitted {
                counts.total -= 1
                let remaining = counts.perIP[key, default: 1] - 1
                counts.perIP[key] = remaining > 0 ? remaining : nil
            } else {
                let remaining = counts.refusedPerIP[key, default: 1] - 1
                counts.refusedPerIP[key] = remaining > 0 ? remaining : nil
            }
        }
    }
}
