import BrokerCrypto
import HTTPServer
import Testing
import WireValues

@testable import BrokerCore

/// Each grant type on its own (``GrantType``): read from a token request's form and carried out
/// against the flow services, without a socket or a router — on both stores, PostgreSQL as three
/// instances taking the steps in turn.
struct GrantTests {
    private static let broker = TokenClient(id: nil, parameter: "app")

    private static func form(_ pairs: [(String, String)]) throws -> FormFields {
        try FormFields(parsing: FormFields.encode(pairs))
    }

    private static func client(_ id: String?) -> TokenClient { TokenClient(id: id, parameter: "client_id") }

    /// The grant's refusal: its status and OAuth error code.
    private static func refusal(_ work: () async throws(HTTPError) -> RedeemedSession) async -> (Int, String?)? {
        do throws(HTTPError) {
            _ = try await work()
            return nil
        } catch {
            return (error.status, error.code)
        }
    }

    @Test func anEndpointNamesTheGrantsItOffersAndReadsOnlyThose() throws {
        let grants = GrantTypes(offered: [AuthorizationCodeGrant.self, DeviceCodeGrant.self])
        #expect(throws: HTTPError.self) { try grants.grant(try Self.form([("grant_type", "refresh_token"), ("refresh_token", "tbs_x")]), client: Self.broker) }
        do {
            _ = try grants.grant(try Self.form([("grant_type", "password")]), client: Self.broker)
            Issue.record("a password grant was read")
        } catch let error as HTTPError {
            #expect(error.code == "unsupported_grant_type")
            #expect(error.description.contains("authorization_code") && error.description.contains(DeviceCodeGrant.type))
        }
        do {
            _ = try grants.grant(try Self.form([("grant_type", "authorization_code"), ("code", "c"), ("code_verifier", "v"), ("redirect_uri", "u")]),
                                 client: Self.broker)
            Issue.record("a code without its client was read")
        } catch let error as HTTPError {
            #expect(error.status == 400 && error.description == "Missing required parameter app.")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aCodeGrantGivesTheNewSessionOnceAndNothingAtAnotherIssuer(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let services = bed.services
            func codeGrant() async throws -> AuthorizationCodeGrant {
                let verifier = PKCE.makeVerifier()
                let code = try #require(try await bed.signIn(verifier: verifier).handoffCode)
                return try AuthorizationCodeGrant(try Self.form([("code", code), ("code_verifier", verifier), ("redirect_uri", FlowTestBed.redirectURI)]),
                                                  client: Self.client(FlowTestBed.app))
            }
            let ours = try await codeGrant()
            let granted = try await ours.grant(at: "idp", proof: nil, services)
            let token = try #require(granted.token)
            #expect(OpaqueToken.hash(token) == granted.session.id && granted.session.subject == "alice")
            #expect(try await bed.stored(granted.session.id) != nil)
            #expect(await Self.refusal { () async throws(HTTPError) in try await ours.grant(at: "idp", proof: nil, services) } ?? (0, nil) == (400, "invalid_grant"),
                    "a code is redeemed once")
            #expect(try await bed.stored(granted.session.id) == nil, "a replayed code ends the session it created")

            let elsewhere = try await codeGrant()
            let revokedBefore = bed.provider.revoked.count
            #expect(await Self.refusal { () async throws(HTTPError) in try await elsewhere.grant(at: "other", proof: nil, services) } ?? (0, nil) == (400, "invalid_grant"))
            await bed.endings.revocations.deliverDue()
            #expect(bed.provider.revoked.count > revokedBefore, "the session the code created is ended, and its grant revoked")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aRefreshGrantNeedsNoClientButRefusesAnotherOne(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let services = bed.services
            let redeemed = try await bed.newSession()
            let token = try #require(redeemed.token)
            func refresh(_ pairs: [(String, String)], client: String?, at provider: String? = "idp") async throws -> (Int, String?)? {
                let grant = try RefreshTokenGrant(try Self.form([("refresh_token", token)] + pairs), client: Self.client(client))
                return await Self.refusal { () async throws(HTTPError) in try await grant.grant(at: provider, proof: nil, services) }
            }
            #expect(try await refresh([], client: nil) == nil)
            #expect(try await refresh([], client: FlowTestBed.app) == nil)
            #expect(try await refresh([], client: "another-app") ?? (0, nil) == (400, "invalid_grant"))
            #expect(try await refresh([], client: nil, at: "other") ?? (0, nil) == (400, "invalid_grant"))
            #expect(try await refresh([("scope", "email")], client: nil) == nil)
            #expect(try await refresh([("scope", "drive")], client: nil) ?? (0, nil) == (400, "invalid_scope"))

            // Due: the provider refreshes it, and the client keeps its refresh token.
            bed.clock.advance(by: 3600)
            let due = try RefreshTokenGrant(try Self.form([("refresh_token", token)]), client: Self.client(nil))
            let fresh = try await due.grant(at: "idp", proof: nil, services)
            #expect(fresh.token == token && fresh.session.accessToken != redeemed.session.accessToken && bed.provider.accepts(fresh.session.accessToken))
            #expect(bed.provider.refreshes == 1)

            let unknown = try RefreshTokenGrant(try Self.form([("refresh_token", "tbs_unknown")]), client: Self.client(nil))
            #expect(await Self.refusal { () async throws(HTTPError) in try await unknown.grant(at: "idp", proof: nil, services) } ?? (0, nil) == (400, "invalid_grant"))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aCodeRedeemedWithAProofBindsTheSessionAndItsRefreshesToThatKey(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let services = bed.services
            let vectors = DPoPProofTests.vectors.proofs
            try #require(vectors.count >= 2)
            let proof = try DPoPProofTests.check(vectors[0].proof, token: nil)
            let another = try DPoPProofTests.check(vectors[1].proof, token: nil)
            let verifier = PKCE.makeVerifier()
            let code = try #require(try await bed.signIn(verifier: verifier).handoffCode)
            let grant = try AuthorizationCodeGrant(try Self.form([("code", code), ("code_verifier", verifier), ("redirect_uri", FlowTestBed.redirectURI)]),
                                                   client: Self.client(FlowTestBed.app))
            let granted = try await grant.grant(at: "idp", proof: proof, services)
            let token = try #require(granted.token)
            #expect(granted.session.keyThumbprint == vectors[0].thumbprint)
            #expect(try await bed.stored(granted.session.id)?.keyThumbprint == vectors[0].thumbprint, "the binding is kept with the session")

            func refresh(_ proof: DPoPProof?) async throws -> (Int, String?)? {
                let grant = try RefreshTokenGrant(try Self.form([("refresh_token", token)]), client: Self.client(nil))
                return await Self.refusal { () async throws(HTTPError) in try await grant.grant(at: "idp", proof: proof, services) }
            }
            #expect(try await refresh(proof) == nil)
            #expect(try await refresh(nil) ?? (0, nil) == (400, "invalid_dpop_proof"), "a bound refresh token without a proof")
            #expect(try await refresh(another) ?? (0, nil) == (400, "invalid_dpop_proof"), "a proof of another key")
            #expect(try await bed.stored(granted.session.id) != nil, "a refused refresh ends nothing")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aDeviceGrantWaitsForTheConfirmedAccount(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let services = bed.services
            let codes = try await services.devices.start(app: FlowTestBed.app, provider: ScriptedProvider.config(), scopes: [])
            let grant = try DeviceCodeGrant(try Self.form([("device_code", codes.deviceCode)]), client: Self.client(FlowTestBed.app))
            #expect(await Self.refusal { () async throws(HTTPError) in try await grant.grant(at: "idp", proof: nil, services) } ?? (0, nil) == (400, "authorization_pending"))

            let waiting = try #require(try await services.devices.find(typed: codes.userCode))
            let started = try await services.devices.signIn(waiting, at: try await bed.login.providers.resolve("idp"))
            let (code, state) = try bed.provider.signIn(started.location, subject: "alice")
            let pending = try #require(try await bed.login.takeLogin(state: state))
            _ = await bed.login.complete(pending, state: state, with: CallbackAnswer(code: code, error: nil, errorDescription: nil, issuer: nil))
            #expect(try await services.devices.confirm(OpaqueToken.hash(codes.deviceCode), state: state, approve: true))
            bed.clock.advance(by: codes.interval)

            #expect(await Self.refusal { () async throws(HTTPError) in try await grant.grant(at: "other", proof: nil, services) } ?? (0, nil) == (400, "invalid_grant"),
                    "another issuer's endpoint gets nothing")
            bed.clock.advance(by: codes.interval)
            #expect(await Self.refusal { () async throws(HTTPError) in try await grant.grant(at: "idp", proof: nil, services) } ?? (0, nil) == (400, "invalid_grant"),
                    "the code was spent by the refused collection")

            #expect(throws: HTTPError.self) { try DeviceCodeGrant(try Self.form([("device_code", codes.deviceCode)]), client: Self.client(nil)) }
        }
    }
}
