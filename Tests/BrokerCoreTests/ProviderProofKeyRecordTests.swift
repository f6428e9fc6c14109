import BrokerCrypto
import Testing

@testable import BrokerCore

/// A grant's DPoP key (towards its provider) is kept wherever the grant is: the login that will
/// bring it, the grant a handoff holds, the session, and a queued revocation — in the records
/// both stores seal.
struct ProviderProofKeyRecordTests {
    static func decoded(_ record: StateRecord) throws -> StateRecord? {
        var bytes: [UInt8] = []
        record.encode(into: &bytes)
        var scopes = ScopeTable()
        var found: StateRecord?
        try StateRecord.decodeAll(bytes[...], scopes: &scopes) { found = $0 }
        return found
    }

    @Test func everyRecordThatHoldsAGrantKeepsItsKey() throws {
        let key = try ProofSigningKey.generate()
        var session = Session(id: OpaqueToken.hash("tbs_a"), provider: "corp", app: "demo", subject: "alice", scopes: ["openid"],
                              accessToken: "at", accessTokenExpiresAt: nil, refreshToken: "rt", idTokenClaims: nil, createdAt: 1,
                              signedInAt: 1, usedAt: 1)
        guard case .session(let bearer)? = try Self.decoded(.session(session)) else { Issue.record("no session"); return }
        #expect(bearer.providerProofKey == nil)
        session.providerProofKey = key
        guard case .session(let bound)? = try Self.decoded(.session(session)) else { Issue.record("no session"); return }
        #expect(bound.providerProofKey == key)

        let grant = Grant(provider: "corp", subject: "alice", scopes: ["openid"], accessToken: "at", accessTokenExpiresAt: nil,
                          refreshToken: "rt", idTokenClaims: nil, signedInAt: 1, proofKey: key)
        #expect(try Grant(grant.encoded()).proofKey == key)
        let revocation = QueuedRevocation(grant, app: "demo", reason: .notHeld, at: 1)
        guard case .revocation(let queued)? = try Self.decoded(.revocation(revocation)) else { Issue.record("no revocation"); return }
        #expect(queued.proofKey == key)

        let pending = PendingAuthorization(provider: "corp", app: "demo", purpose: .device(OpaqueToken.hash("dc")), verifier: "v", nonce: "n",
                                           requestedScopes: ["openid"], expiresAt: 2, beganAt: 1, proofKey: key)
        guard case .pending(_, let login)? = try Self.decoded(.pending(OpaqueToken.hash("state"), pending)) else { Issue.record("no login"); return }
        #expect(login.proofKey == key)
    }

    @Test func aKeyOfTheWrongLengthIsADamagedRecord() throws {
        var fields = FieldWriter()
        fields.bytes(10, [1, 2, 3])
        let grant = Grant(provider: "corp", subject: "alice", scopes: [], accessToken: "at", accessTokenExpiresAt: nil, refreshToken: nil,
                          idTokenClaims: nil, signedInAt: 1)
        #expect(throws: StateDecodingError.self) { try Grant(grant.encoded() + fields.bytes) }
    }
}
