import BrokerCrypto

/// One change to the broker's state, as the journal stores it. Every record carries the full
/// new value (or the removal), so replaying a record twice, or replaying one whose effect a
/// snapshot already holds, changes nothing: snapshot + journal replay is always consistent.
enum StateRecord: Sendable {
    case session(Session)
    case sessionRemoved(SHA256Digest)
    case pending(SHA256Digest, PendingAuthorization)
    case pendingRemoved(SHA256Digest)
    case handoff(SHA256Digest, Handoff)
    case device(SHA256Digest, DeviceAuthorization)
    /// A token accepted once (``StateStore/spendOnce(_:until:)``), remembered until then.
    case spent(SHA256Digest, until: Double)
    /// A grant's tokens waiting to be revoked at their provider.
    case revocation(QueuedRevocation)
    /// A revocation the provider confirmed, or that was given up.
    case revocationRemoved(SHA256Digest)
    /// A sign-out remembered for sign-ins under way (``StateStore/rememberSignOut(_:until:)``),
    /// under the hash of its provider and its subject or provider session.
    case signOut(SHA256Digest, RememberedSignOut)

    /// Record types: fixed forever (docs/state.md, "Format").
    private enum Kind: UInt8 {
        case session = 1
        case sessionRemoved = 2
        case pending = 3
        case pendingRemoved = 4
        case handoff = 5
        case device = 6
        case spent = 7
        case revocation = 8
        case revocationRemoved = 9
        case signOut = 10
    }

    /// `kind (1 byte) | length (varint) | fields`.
    func encode(into output: inout [UInt8]) {
        var fields = FieldWriter(capacity: 512)
        let kind: Kind
        switch self {
        case .session(let session):
            kind = .session
            session.encode(into: &fields)
        case .sessionRemoved(let id):
            kind = .sessionRemoved
            fields.digest(1, id)
        case .pending(let state, let pending):
            kind = .pending
            fields.digest(1, state)
            pending.encode(into: &fields)
        case .pendingRemoved(let state):
            kind = .pendingRemoved
            fields.digest(1, state)
        case .handoff(let code, let handoff):
            kind = .handoff
            fields.digest(1, code)
            handoff.encode(into: &fields)
        case .device(let code, let device):
            kind = .device
            fields.digest(1, code)
            device.encode(into: &fields)
        case .spent(let id, let until):
            kind = .spent
            fields.digest(1, id)
            fields.double(2, until)
        case .revocation(let revocation):
            kind = .revocation
            revocation.encode(into: &fields)
        case .revocationRemoved(let id):
            kind = .revocationRemoved
            fields.digest(1, id)
        case .signOut(let id, let signOut):
            kind = .signOut
            fields.digest(1, id)
            fields.double(2, signOut.signedInBefore)
            fields.string(3, signOut.reason.rawValue)
            fields.double(4, signOut.until)
        }
        output.append(kind.rawValue)
        FieldWriter.appendVarint(UInt64(fields.bytes.count), to: &output)
        output += fields.bytes
    }

    /// Decodes every record in `bytes` (the plaintext of one frame), sharing scope lists through
    /// `scopes` (one table for a whole file). Records of a kind this version does not know are
    /// skipped.
    static func decodeAll(
        _ bytes: ArraySlice<UInt8>, scopes: inout ScopeTable, _ body: (StateRecord) -> Void
    ) throws(StateDecodingError) {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let rawKind = bytes[index]
            index += 1
            let length = try FieldReader.varint(bytes, &index)
            guard length <= UInt64(bytes.endIndex - index) else { throw StateDecodingError("a record runs past its frame") }
            let end = index + Int(length)
            defer { index = end }
            guard let kind = Kind(rawValue: rawKind) else { continue }
            let fields = try FieldReader(bytes[index..<end])
            switch kind {
            case .session: body(.session(try Session(fields, scopes: &scopes)))
            case .sessionRemoved: body(.sessionRemoved(try fields.requiredDigest(1)))
            case .pending: body(.pending(try fields.requiredDigest(1), try PendingAuthorization(fields)))
            case .pendingRemoved: body(.pendingRemoved(try fields.requiredDigest(1)))
            case .handoff: body(.handoff(try fields.requiredDigest(1), try Handoff(fields)))
            case .device: body(.device(try fields.requiredDigest(1), try DeviceAuthorization(fields)))
            case .spent: body(.spent(try fields.requiredDigest(1), until: try fields.requiredDouble(2)))
            case .revocation: body(.revocation(try QueuedRevocation(fields)))
            case .revocationRemoved: body(.revocationRemoved(try fields.requiredDigest(1)))
            case .signOut:
                body(.signOut(try fields.requiredDigest(1), RememberedSignOut(
                    signedInBefore: try fields.requiredDouble(2), reason: try EndReason(fields.requiredString(3)), until: try fields.requiredDouble(4)
                )))
            }
        }
    }
}

// Field tags per record kind (docs/state.md, "Format"). Tag 1 is the record's key.

extension Session {
    func encode(into fields: inout FieldWriter) {
        fields.digest(1, id)
        fields.string(2, provider)
        fields.string(3, app)
        fields.string(4, subject)
        fields.joined(5, scopes)
        fields.string(6, accessToken)
        fields.double(7, accessTokenExpiresAt)
        fields.string(8, refreshToken)
        if let idTokenClaims { fields.bytes(9, idTokenClaims) }
        fields.double(10, createdAt)
        fields.double(11, usedAt)
        fields.double(12, refreshedAt)
        // Always written ("" for none), so that reading a session never parses its claims.
        fields.string(13, providerSessionID ?? "")
        fields.double(14, signedInAt)
        fields.string(15, keyThumbprint)
        if let providerProofKey { fields.bytes(16, providerProofKey.bytes) }
    }

    init(_ fields: FieldReader, scopes: inout ScopeTable) throws(StateDecodingError) {
        let claims = fields.bytes(9)
        let providerSessionID: String?
        if let written = try fields.string(13) {
            providerSessionID = written.isEmpty ? nil : written
        } else {
            // Written before field 13 existed: the `sid` is in the claims, if anywhere.
            providerSessionID = Self.providerSessionID(in: claims)
        }
        let createdAt = try fields.requiredDouble(10)
        self.init(
            id: try fields.requiredDigest(1),
            provider: try fields.requiredString(2),
            app: try fields.requiredString(3),
            subject: try fields.requiredString(4),
            scopes: scopes.list(try fields.requiredString(5)),
            accessToken: try fields.requiredString(6),
            accessTokenExpiresAt: try fields.double(7),
            refreshToken: try fields.string(8),
            idTokenClaims: claims,
            createdAt: createdAt,
            // Written before field 14 existed: the session was made at its sign-in.
            signedInAt: try fields.double(14) ?? createdAt,
            usedAt: try fields.requiredDouble(11),
            refreshedAt: try fields.double(12),
            providerSessionID: providerSessionID,
            keyThumbprint: try fields.string(15),
            providerProofKey: try Self.proofKey(fields.bytes(16))
        )
    }

    /// A grant's key as its records keep it (``ProofSigningKey/bytes``).
    static func proofKey(_ bytes: [UInt8]?) throws(StateDecodingError) -> ProofSigningKey? {
        guard let bytes else { return nil }
        guard let key = ProofSigningKey(bytes: bytes) else { throw StateDecodingError("a proof key of the wrong length") }
        return key
    }
}

extension PendingAuthorization {
    /// The purpose in the fields it has always had: an app's way back in 4–6, the session of an
    /// incremental authorization in 10, a device code in 12. A device login writes 4 and 6 empty,
    /// as files written before the purpose was one value require them.
    func encode(into fields: inout FieldWriter) {
        fields.string(2, provider)
        fields.string(3, app)
        switch purpose {
        case .app(let back):
            Self.encode(back, into: &fields)
        case .incremental(let back, let session):
            Self.encode(back, into: &fields)
            fields.digest(10, session)
        case .device(let code):
            fields.string(4, "")
            fields.string(6, "")
            fields.digest(12, code)
        }
        fields.string(7, verifier)
        fields.string(8, nonce)
        fields.joined(9, requestedScopes)
        fields.double(11, expiresAt)
        fields.double(13, beganAt)
        fields.string(14, signInID)
        if let proofKey { fields.bytes(15, proofKey.bytes) }
    }

    private static func encode(_ back: AppReturn, into fields: inout FieldWriter) {
        fields.string(4, back.redirectURI)
        fields.string(5, back.state)
        fields.string(6, back.challenge)
    }

    init(_ fields: FieldReader) throws(StateDecodingError) {
        let purpose: LoginPurpose
        if let device = try fields.digest(12) {
            purpose = .device(device)
        } else {
            let back = AppReturn(redirectURI: try fields.requiredString(4), state: try fields.string(5), challenge: try fields.requiredString(6))
            purpose = if let session = try fields.digest(10) { .incremental(back, session: session) } else { .app(back) }
        }
        let expiresAt = try fields.requiredDouble(11)
        self.init(
            provider: try fields.requiredString(2),
            app: try fields.requiredString(3),
            purpose: purpose,
            verifier: try fields.requiredString(7),
            nonce: try fields.requiredString(8),
            requestedScopes: try fields.requiredString(9).split(separator: " ").map(String.init),
            expiresAt: expiresAt,
            // Written before field 13 existed: as early as its lifetime allows.
            beganAt: try fields.double(13) ?? expiresAt - SessionSettings.loginLifetimeSecondsRange.upperBound,
            signInID: try fields.string(14),
            proofKey: try Session.proofKey(fields.bytes(15))
        )
    }
}

extension Handoff {
    /// Spent reasons: fixed forever (docs/state.md, "Format").
    private static let spentExpired = 1.0, spentRefusedTooOften = 2.0, spentSignedOut = 3.0

    /// The status in the fields it has always had — a grant to hold in 6, a session in 7, redeemed
    /// in 8 — and a spent code's reason in 10, so that a record reads the same to brokers from
    /// before the status was one value.
    func encode(into fields: inout FieldWriter) {
        fields.string(2, app)
        fields.string(3, redirectURI)
        fields.string(4, appChallenge)
        fields.double(5, expiresAt)
        switch status {
        case .holding(let grant):
            fields.bytes(6, grant.encoded())
        case .merged(let session, let bound, let provider, let providerBound):
            fields.digest(7, session)
            if let bound { fields.string(11, bound) }
            if let provider { fields.string(12, provider) }
            if providerBound { fields.flag(13, true) }
        case .redeemed(let session):
            fields.digest(7, session)
            fields.flag(8, true)
        case .spent(let reason):
            let number = switch reason {
            case .expired: Self.spentExpired
            case .refusedTooOften: Self.spentRefusedTooOften
            case .signedOut: Self.spentSignedOut
            }
            fields.flag(8, true)
            fields.double(10, number)
        }
        if refusals > 0 { fields.double(9, Double(refusals)) }
    }

    init(_ fields: FieldReader) throws(StateDecodingError) {
        let grant = try fields.bytes(6).map { raw throws(StateDecodingError) in try Grant(raw) }
        let session = try fields.digest(7)
        let status: Status
        switch (fields.flag(8), grant, session, try fields.double(10)) {
        case (false, let grant?, _, _): status = .holding(grant)
        case (false, nil, let session?, _):
            status = .merged(into: session, boundTo: try fields.string(11), provider: try fields.string(12), providerBound: fields.flag(13))
        case (true, _, _, Self.spentRefusedTooOften?): status = .spent(.refusedTooOften)
        case (true, _, _, Self.spentSignedOut?): status = .spent(.signedOut)
        case (true, _, let session?, nil): status = .redeemed(session)
        // Redeemed releasing nothing (expired or refused, before reasons were written).
        default: status = .spent(.expired)
        }
        self.init(
            app: try fields.requiredString(2),
            redirectURI: try fields.requiredString(3),
            appChallenge: try fields.requiredString(4),
            expiresAt: try fields.requiredDouble(5),
            status: status,
            refusals: Int(try fields.double(9) ?? 0)
        )
    }
}

extension Grant {
    /// The grant as the nested fields of a handoff or device record.
    func encoded() -> [UInt8] {
        var fields = FieldWriter()
        fields.string(1, provider)
        fields.string(2, subject)
        fields.joined(3, scopes)
        fields.string(4, accessToken)
        fields.double(5, accessTokenExpiresAt)
        fields.string(6, refreshToken)
        if let idTokenClaims { fields.bytes(7, idTokenClaims) }
        fields.double(8, signedInAt)
        fields.string(9, signInID)
        if let proofKey { fields.bytes(10, proofKey.bytes) }
        return fields.bytes
    }

    init(_ encoded: [UInt8]) throws(StateDecodingError) {
        let fields = try FieldReader(encoded[...])
        self.init(
            provider: try fields.requiredString(1),
            subject: try fields.requiredString(2),
            scopes: try fields.requiredString(3).split(separator: " ").map(String.init),
            accessToken: try fields.requiredString(4),
            accessTokenExpiresAt: try fields.double(5),
            refreshToken: try fields.string(6),
            idTokenClaims: fields.bytes(7),
            // Written before field 8 existed: taken as signed in before any sign-out.
            signedInAt: try fields.double(8) ?? 0,
            signInID: try fields.string(9),
            proofKey: try Session.proofKey(fields.bytes(10))
        )
    }
}

extension DeviceAuthorization {
    /// Status numbers: fixed forever (docs/state.md, "Format").
    private static let pending = 0.0, approved = 1.0, denied = 2.0, collected = 3.0, signedIn = 4.0, signedOut = 5.0, expired = 6.0

    func encode(into fields: inout FieldWriter) {
        fields.string(2, app)
        fields.string(3, provider)
        fields.joined(4, scopes)
        fields.digest(5, userCode)
        fields.double(6, expiresAt)
        fields.double(7, interval)
        switch status {
        case .pending: fields.double(8, Self.pending)
        case .signedIn(let grant, let login):
            fields.double(8, Self.signedIn)
            fields.bytes(9, grant.encoded())
            fields.digest(10, login)
        case .approved(let grant):
            fields.double(8, Self.approved)
            fields.bytes(9, grant.encoded())
        case .denied: fields.double(8, Self.denied)
        case .collected: fields.double(8, Self.collected)
        case .signedOut: fields.double(8, Self.signedOut)
        case .expired: fields.double(8, Self.expired)
        }
    }

    init(_ fields: FieldReader) throws(StateDecodingError) {
        let status: Status
        switch try fields.requiredDouble(8) {
        case Self.pending: status = .pending
        case Self.approved:
            guard let grant = fields.bytes(9) else { throw StateDecodingError("an approved device code without its grant") }
            status = .approved(try Grant(grant))
        case Self.signedIn:
            guard let grant = fields.bytes(9) else { throw StateDecodingError("a signed-in device code without its grant") }
            status = .signedIn(try Grant(grant), login: try fields.requiredDigest(10))
        case Self.denied: status = .denied
        case Self.collected: status = .collected
        case Self.signedOut: status = .signedOut
        case Self.expired: status = .expired
        default: throw StateDecodingError("a device code with an unknown status")
        }
        self.init(
            app: try fields.requiredString(2),
            provider: try fields.requiredString(3),
            scopes: try fields.requiredString(4).split(separator: " ").map(String.init),
            userCode: try fields.requiredDigest(5),
            expiresAt: try fields.requiredDouble(6),
            interval: try fields.requiredDouble(7),
            lastPolledAt: nil,
            status: status
        )
    }
}
