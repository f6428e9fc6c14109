import BrokerCrypto
import Synchronization

/// API proxy transfers in flight per session, and those whose answer streams to each client
/// address. A client that does not read a streaming answer holds its transfer until the upstream
/// timeout ends it; these bounds keep one session, or one address's unread streams, from holding
/// every place among the running transfers meanwhile. An address's calls answered whole do not
/// count against it: a backend calling for many users from one address, each session within its
/// own bound, is never refused for its address.
final class ProxyTransferSlots: Sendable {
    private struct Counts {
        /// By session id: its digest hashes faster than its hex would.
        var sessions: [SHA256Digest: Int] = [:]
        /// Transfers streaming an answer to each client address.
        var streams: [String: Int] = [:]
    }

    private let counts = Mutex(Counts())
    private let perSession: Int
    private let perClient: Int

    init(perSession: Int, perClient: Int) {
        self.perSession = perSession
        self.perClient = perClient
    }

    /// A slot for one more transfer of `session` from `client`, or nil when the session has its
    /// bound in flight already, or the address its bound of answers streaming to it.
    func take(session: SHA256Digest, client: String) -> Slot? {
        let taken = counts.withLock { counts -> Bool in
            guard counts.sessions[session, default: 0] < perSession, counts.streams[client, default: 0] < perClient else { return false }
            counts.sessions[session, default: 0] += 1
            return true
        }
        return taken ? Slot(slots: self, session: session, client: client) : nil
    }

    /// One more answer streaming to `client`, unless the address has its bound already (and not
    /// `pastTheBound`): the bound holds when answers that were admitted together begin to stream.
    private func startStreaming(_ client: String, pastTheBound: Bool) -> Bool {
        counts.withLock { counts in
            guard pastTheBound || counts.streams[client, default: 0] < perClient else { return false }
            counts.streams[client, default: 0] += 1
            return true
        }
    }

    private func give(session: SHA256Digest, client: String, streaming: Bool) {
        counts.withLock { counts in
            counts.sessions[session] = counts.sessions[session].flatMap { $0 > 1 ? $0 - 1 : nil }
            if streaming { counts.streams[client] = counts.streams[client].flatMap { $0 > 1 ? $0 - 1 : nil } }
        }
    }

    /// One transfer's place, given back once, when the transfer has ended (its body too).
    final class Slot: Sendable {
        private let slots: ProxyTransferSlots
        private let session: SHA256Digest
        private let client: String
        private let streaming = Atomic(false)
        private let released = Atomic(false)

        fileprivate init(slots: ProxyTransferSlots, session: SHA256Digest, client: String) {
            self.slots = slots
            self.session = session
            self.client = client
        }

        /// Whether the answer may stream to the client from now on, counted against the client's
        /// address: false when the address has its bound of answers streaming to it, unless
        /// `pastTheBound`. Asked once.
        func stream(pastTheBound: Bool) -> Bool {
            guard slots.startStreaming(client, pastTheBound: pastTheBound) else { return false }
            streaming.store(true, ordering: .releasing)
            return true
        }

        func release() {
            guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
            slots.give(session: session, client: client, streaming: streaming.load(ordering: .acquiring))
        }
    }
}
