import Synchronization

/// API proxy transfers in flight, counted per session and per client address. A client that
/// does not read its answers holds each of its transfers until the upstream timeout ends it;
/// these bounds keep one session, or one address, from holding every place among the running
/// transfers meanwhile.
final class ProxyTransferSlots: Sendable {
    private struct Counts {
        var sessions: [String: Int] = [:]
        var clients: [String: Int] = [:]
    }

    private let counts = Mutex(Counts())
    private let perSession: Int
    private let perClient: Int

    init(perSession: Int, perClient: Int) {
        self.perSession = perSession
        self.perClient = perClient
    }

    /// A slot for one more transfer of `session` from `client`, or nil when either has its bound
    /// in flight already.
    func take(session: String, client: String) -> Slot? {
        let taken = counts.withLock { counts -> Bool in
            guard counts.sessions[session, default: 0] < perSession, counts.clients[client, default: 0] < perClient else { return false }
            counts.sessions[session, default: 0] += 1
            counts.clients[client, default: 0] += 1
            return true
        }
        return taken ? Slot(slots: self, session: session, client: client) : nil
    }

    private func give(session: String, client: String) {
        counts.withLock { counts in
            counts.sessions[session] = counts.sessions[session].flatMap { $0 > 1 ? $0 - 1 : nil }
            counts.clients[client] = counts.clients[client].flatMap { $0 > 1 ? $0 - 1 : nil }
        }
    }

    /// One transfer's place, given back once, when the transfer has ended (its body too).
    final class Slot: Sendable {
        private let slots: ProxyTransferSlots
        private let session: String
        private let client: String
        private let released = Atomic(false)

        fileprivate init(slots: ProxyTransferSlots, session: String, client: String) {
            self.slots = slots
            self.session = session
            self.client = client
        }

        func release() {
            guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
            slots.give(session: session, client: client)
        }
    }
}
