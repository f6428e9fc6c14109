import BrokerCrypto

/// The embedded store's logins, handoff and device codes, sign-outs and revocation queue: each
/// step decided on its value, its effects carried out under the flow table's lock and logged in
/// one change with it (``apply(_:to:logging:now:)``).
extension EmbeddedStateStore {
    func beginLogin(_ state: SHA256Digest, _ pending: PendingAuthorization) async throws(StateWriteError) {
        // Logged without waiting: a crash may lose a login begun in the last moments (its user
        // signs in again); the redirect to the provider is not held up by an fsync.
        _ = flows.change { entries in
            entries.pending[state] = pending
            return log.enqueue([.pending(state, pending)])
        }
    }

    func takeLogin(_ state: SHA256Digest, now: Double) async throws(StateWriteError) -> PendingAuthorization? {
        flows.change { entries in
            guard let pending = entries.pending.removeValue(forKey: state) else { return nil }
            _ = log.enqueue([.pendingRemoved(state)])
            return pending.expiresAt > now ? pending : nil
        }
    }

    func issueHandoff(_ code: SHA256Digest, _ handoff: Handoff) async throws(StateWriteError) {
        try await flows.change { entries in
            entries.handoffs[code] = handoff
            return log.enqueue([.handoff(code, handoff)])
        }.wait()
    }

    /// A redemption whose change could not be written is undone in memory, as PostgreSQL rolls it
    /// back: the client told to retry finds the code as it was, not redeemed (which its retry
    /// would take for a replay, ending the session it was never given).
    func redeemHandoff(_ code: SHA256Digest, _ attempt: HandoffAttempt) async throws(StateWriteError) -> Transition<HandoffRedemption> {
        let (transition, tickets, before) = flows.change { entries -> (Transition<HandoffRedemption>, [DurabilityTicket], Handoff?) in
            guard var handoff = entries.handoffs[code] else { return (Transition(answer: .unknown), [], nil) }
            let before = handoff
            let (answer, effects) = handoff.redeem(attempt)
            entries.handoffs[code] = handoff
            let (transition, tickets) = apply(effects, to: &entries, answer: answer, logging: [.handoff(code, handoff)], now: attempt.at)
            return (transition, tickets, before)
        }
        do {
            for ticket in tickets { try await ticket.wait() }
        } catch {
            if let before {
                switch transition.answer {
                case .released: if let made = transition.made { undoRelease(code, back: before, made: made) }
                case .merged(let session): undoMerge(code, back: before, session: session)
                default: break
                }
            }
            throw error
        }
        return transition
    }

    /// Puts a merged code whose redemption could not be written back as it was, while it still
    /// stands for `session` (a retry of it would otherwise be a replay, ending the session the
    /// app held before the sign-in).
    private func undoMerge(_ code: SHA256Digest, back before: Handoff, session: SHA256Digest) {
        _ = flows.change { entries -> DurabilityTicket? in
            guard case .redeemed(session)? = entries.handoffs[code]?.status else { return nil }
            entries.handoffs[code] = before
            return log.enqueue([.handoff(code, before)])
        }
    }

    /// Puts a code whose release could not be written back as it was, and takes the session it
    /// made out of memory: unless that session has ended since (its grant is then being revoked,
    /// and the code stays spent). The journal holds neither: a failed frame is cut off the file.
    private func undoRelease(_ code: SHA256Digest, back before: Handoff, made: Session) {
        flows.change { entries in
            guard case .redeemed(made.id)? = entries.handoffs[code]?.status else { return }
            _ = sessions.remove(made.id) { removed in
                guard removed != nil else { return [] }
                entries.handoffs[code] = before
                return [.handoff(code, before)]
            }
        }
    }

    func issueDeviceCode(_ code: SHA256Digest, _ device: DeviceAuthorization) async throws(StateWriteError) -> Bool {
        let now = clock()
        let ticket = flows.change { entries -> DurabilityTicket? in
            if let other = entries.userCodes[device.userCode], entries.devices[other]?.isPending(at: now) == true { return nil }
            entries.put(code, device)
            return log.enqueue([.device(code, device)])
        }
        guard let ticket else { return false }
        try await ticket.wait()
        return true
    }

    func pendingDeviceCode(userCode: SHA256Digest, now: Double) async throws(StateReadError) -> (code: SHA256Digest, device: DeviceAuthorization)? {
        flows.change { entries in
            guard let code = entries.userCodes[userCode], let device = entries.devices[code], device.isPending(at: now) else { return nil }
            return (code, device)
        }
    }

    func deviceCode(_ code: SHA256Digest, now: Double) async throws(StateReadError) -> DeviceAuthorization? {
        flows.change { entries in entries.devices[code].flatMap { $0.expiresAt > now ? $0 : nil } }
    }

    func decideDeviceCode(_ code: SHA256Digest, _ decision: DeviceDecision, now: Double) async throws(StateWriteError) -> Transition<DeviceAuthorization.Status?> {
        try await changeDevice(code, now: now, absent: nil) { device in device.decide(decision, at: now) }
    }

    func pollDeviceCode(_ code: SHA256Digest, app: String, session: SHA256Digest, keyThumbprint: String?, now: Double) async throws(StateWriteError) -> Transition<DevicePoll> {
        try await changeDevice(code, now: now, absent: .unknown) { device in device.poll(by: app, at: now, session: session, keyThumbprint: keyThumbprint) }
    }

    /// Applies `step` to the device code and carries out its effects; logged when its status
    /// moved (the time of a poll and the interval are kept in memory only).
    private func changeDevice<T: Sendable>(
        _ code: SHA256Digest, now: Double, absent: T, _ step: (inout DeviceAuthorization) -> (T, [GrantEffect])
    ) async throws(StateWriteError) -> Transition<T> {
        let (transition, tickets) = flows.change { entries -> (Transition<T>, [DurabilityTicket]) in
            guard var device = entries.devices[code] else { return (Transition(answer: absent), []) }
            let before = device.status.step
            let (answer, effects) = step(&device)
            entries.put(code, device)
            return apply(effects, to: &entries, answer: answer, logging: device.status.step == before ? [] : [.device(code, device)], now: now)
        }
        for ticket in tickets { try await ticket.wait() }
        return transition
    }

    func endSignIns(_ signOut: SignOut, now: Double) async throws(StateWriteError) -> [EndedGrant] {
        let (ended, tickets) = flows.change { entries -> ([EndedGrant], [DurabilityTicket]) in
            var records: [StateRecord] = []
            var effects: [GrantEffect] = []
            for (code, var handoff) in entries.handoffs {
                let ending = handoff.end(signOut)
                guard !ending.isEmpty else { continue }
                entries.handoffs[code] = handoff
                records.append(.handoff(code, handoff))
                effects += ending
            }
            for (code, var device) in entries.devices {
                let ending = device.end(signOut)
                guard !ending.isEmpty else { continue }
                entries.put(code, device)
                records.append(.device(code, device))
                effects += ending
            }
            let (transition, tickets) = apply(effects, to: &entries, answer: (), logging: records, now: now)
            return (transition.ended, tickets)
        }
        for ticket in tickets { try await ticket.wait() }
        return ended
    }

    func rememberSignOut(_ signOut: SignOut, until: Double) async throws(StateWriteError) {
        guard let scope = signOut.scope else { return }
        try await flows.change { entries in
            let key = Self.signOutKey(provider: signOut.provider, scope)
            let remembered = RememberedSignOut(signedInBefore: signOut.signedInBefore, reason: signOut.reason, until: until)
            let kept = entries.signOuts[key].map { $0.merged(remembered) } ?? remembered
            entries.signOuts[key] = kept
            return log.enqueue([.signOut(key, kept)])
        }.wait()
    }

    func signOut(covering grant: Grant, now: Double) async throws(StateReadError) -> SignOut? {
        flows.change { entries in
            let remembered = SignOut.scopes(covering: grant).compactMap { scope in
                entries.signOuts[Self.signOutKey(provider: grant.provider, scope)].map { ($0, scope) }
            }
            return SignOut.covering(grant, among: remembered, now: now)
        }
    }

    /// The key a sign-out of `scope` at `provider` is remembered under.
    private static func signOutKey(provider: String, _ scope: SignOut.Scope) -> SHA256Digest {
        let (kind, value) = switch scope {
        case .subject(let subject): ("sub", subject)
        case .providerSession(let session): ("sid", session)
        }
        return SHA256.hash(Array("sign-out\u{0}\(provider)\u{0}\(kind)\u{0}\(value)".utf8))
    }

    func queueRevocation(_ grant: Grant, app: String, _ reason: EndReason, now: Double) async throws(StateWriteError) -> EndedGrant {
        let (transition, tickets) = flows.change { entries in
            apply([.revoke(grant, held: .none, app: app, reason)], to: &entries, answer: (), logging: [], now: now)
        }
        for ticket in tickets { try await ticket.wait() }
        return transition.ended[0]
    }

    func dueRevocations(now: Double, limit: Int, claim: Double, id: SHA256Digest?) async throws(StateWriteError) -> [QueuedRevocation] {
        flows.change { entries in
            let candidates = id.map { [entries.revocations[$0]].compactMap { $0 } }
                ?? entries.revocations.values.filter { $0.dueAt <= now }.sorted { $0.dueAt < $1.dueAt }
            let taken = candidates.filter { id != nil || (entries.claimed[$0.id] ?? 0) <= now }.prefix(limit)
            for revocation in taken { entries.claimed[revocation.id] = now + claim }
            return Array(taken)
        }
    }

    func settleRevocation(_ id: SHA256Digest, next: QueuedRevocation?) async throws(StateWriteError) {
        try await flows.change { entries in
            entries.claimed[id] = nil
            // Settled already by another delivery: nothing left to keep.
            guard entries.revocations[id] != nil else { return DurabilityTicket.immediate }
            entries.revocations[id] = next
            return log.enqueue([next.map { .revocation($0) } ?? .revocationRemoved(id)])
        }.wait()
    }

    func countRevocations() async throws(StateReadError) -> Int {
        flows.change { $0.revocations.count }
    }

    func countPendingSignIns() async throws(StateReadError) -> Int {
        flows.change { $0.pending.count + $0.devices.count }
    }

    /// A token whose spending could not be written is not spent in memory either: its sender's
    /// retry counts, as with PostgreSQL's rollback.
    func spendOnce(_ id: SHA256Digest, until: Double) async throws(StateWriteError) -> Bool {
        let now = clock()
        let change = flows.change { entries -> (DurabilityTicket, Double?)? in
            let before = entries.spent[id]
            if let before, before > now { return nil }
            entries.spent[id] = until
            return (log.enqueue([.spent(id, until: until)]), before)
        }
        guard let (ticket, before) = change else { return false }
        do {
            try await ticket.wait()
        } catch {
            // Logged too: a snapshot taken meanwhile holds the token spent.
            _ = flows.change { entries -> DurabilityTicket? in
                guard entries.spent[id] == until else { return nil }
                entries.spent[id] = before
                return log.enqueue([.spent(id, until: before ?? 0)])
            }
            throw error
        }
        return true
    }

    func isSpent(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Bool {
        flows.change { entries in entries.spent[id].map { $0 > now } ?? false }
    }

    /// Carries a step's `effects` out, under the flow table's lock (`entries`), logging them with
    /// the step's own `records` in one change: revocations join the tables first, then a session
    /// made or ended takes its shard's lock inside this one, and the whole change is logged
    /// there (a step makes or ends one session at most).
    func apply<T: Sendable>(
        _ effects: [GrantEffect], to entries: inout FlowTable.Entries, answer: T, logging records: [StateRecord], now: Double
    ) -> (Transition<T>, [DurabilityTicket]) {
        var transition = Transition(answer: answer)
        var records = records
        var tickets: [DurabilityTicket] = []
        for case .revoke(let grant, let holder, let app, let reason) in effects {
            let (ended, queued) = EndedGrant.of(grant, held: holder, app: app, reason: reason, at: now)
            entries.revocations[queued.id] = queued
            records.append(.revocation(queued))
            transition.ended.append(ended)
        }
        for effect in effects {
            switch effect {
            case .revoke:
                continue
            case .makeSession(let session):
                tickets.append(sessions.insert(session, logging: records))
                records = []
                transition.made = session
            case .endSession(let id, let reason):
                let (_, ticket) = sessions.remove(id) { removed in
                    guard let removed else { return records }
                    let (ended, queued) = EndedGrant.of(removed, reason: reason, at: now)
                    entries.revocations[queued.id] = queued
                    transition.ended.append(ended)
                    return records + [.revocation(queued)]
                }
                tickets.append(ticket)
                records = []
            }
        }
        if !records.isEmpty { tickets.append(log.enqueue(records)) }
        return (transition, tickets)
    }
}

extension DeviceAuthorization.Status {
    /// Which step a status is at, to tell whether a change moved it on.
    var step: Int {
        switch self {
        case .pending: 0
        case .approved: 1
        case .denied: 2
        case .collected: 3
        case .signedIn: 4
        case .signedOut: 5
        case .expired: 6
        }
    }
}
