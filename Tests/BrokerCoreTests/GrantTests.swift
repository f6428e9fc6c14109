import BrokerCrypto
import HTTPServer
import Testing
import WireValues

@testable import BrokerCore

/// Each grant type's handler (``GrantType``): read from a token request's form and carried out
/// against the flow services, without a socket or a router — on both stores, PostgreSQL as three
/// instances taking the steps in turn. A refusal is the flow's (``GrantRefusal``), checked as
/// the token endpoints answer it.
struct GrantTests {
    private static let broker = TokenClient(id: nil, parameter: "app")

    private static func form(_ pairs: [(String, String)]) throws -> FormFields {
        try FormFields(parsing: FormFields.encode(pairs))
    }

    private static func client(_ id: String?) -> TokenClient { TokenClient(id: id, parameter: "client_id") }

    /// The grant's refusal, as a token endpoint answers it: its status and OAuth error code.
    private static func refusal(_ grant: RequestedGrant, at provider: String? = "idp", proof: DPoPProof? = nil) async -> (Int, String?)? {
        do throws(GrantRefusal) {
            _ = try await grant.carryOut(provider, proof)
            return nil
        } catch {
            return (error.httpError.status, error.httpError.code)
        }
    }

    /// Every grant handler, made as the broker makes them (``GrantHandlers``) over the bed's services.
    private static func grants(_ bed: FlowTestBed) -> GrantTypes {
        GrantHandlers(bed.services).standard
    }

    @Test func anEndpointNamesTheGrantsItOffersAndReadsOnlyThose() async throws {
        let bed = try await FlowTestBed(.embedded)
        try await bed.closing {
            let grants = GrantHandlers(bed.services).brokers
            #expect(grants.types == ["authorization_code", DeviceCodeGrant.type])
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
    }

    @Test(arguments: StoreKind.allCases)
    func aCodeGrantGivesTheNewSessionOnceAndNothingAtAnotherIssuer(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let grants = Self.grants(bed)
            func codeGrant() async throws -> RequestedGrant {
                let verifier = PKCE.makeVerifier()
                let code = try #require(try await bed.signIn(verifier: verifier).handoffCode)
                return try grants.grant(try Self.form([("grant_type", "authorization_code"), ("code", code), ("code_verifier", verifier),
                                                       ("redirect_uri", FlowTestBed.redirectURI)]), client: Self.client(FlowTestBed.app))
            }
            let ours = try await codeGrant()
            #expect(ours.limitedPerAddress)
            let granted = try await ours.carryOut("idp", nil)
            let token = try #require(granted.token)
            #expect(OpaqueToken.hash(token) == granted.session.id && granted.session.subject == "alice")
            #expect(try await bed.stored(granted.session.id) != nil)
            #expect(await Self.refusal(ours) ?? (0, nil) == (400, "invalid_grant"), "a code is redeemed once")
            #expect(try await bed.stored(granted.session.id) == nil, "a replayed code ends the session it created")

            let elsewhere = try await codeGrant()
            let revokedBefore = bed.provider.revoked.count
            #expect(await Self.refusal(elsewhere, at: "other") ?? (0, nil) == (400, "invalid_grant"))
            await bed.endings.revocations.deliverDue()
            #expect(bed.provider.revoked.count == revokedBefore, "refused before it was spent: no session made, nothing revoked")
            #expect(try await elsewhere.carryOut("idp", nil).token != nil, "the app redeems it at its own issuer")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aRefreshGrantNeedsNoClientButRefusesAnotherOne(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let grants = Self.grants(bed)
            let redeemed = try await bed.newSession()
            let token = try #require(redeemed.token)
            func refreshGrant(_ token: String, _ pairs: [(String, String)] = [], client: String? = nil) throws -> RequestedGrant {
                try grants.grant(try Self.form([("grant_type", "refresh_token"), ("refresh_token", token)] + pairs), client: Self.client(client))
            }
            func refresh(_ pairs: [(String, String)], client: String?, at provider: String? = "idp") async throws -> (Int, String?)? {
                await Self.refusal(try refreshGrant(token, pairs, client: client), at: provider)
            }
            #expect(try !refreshGrant(token).limitedPerAddress)
            #expect(try await refresh([], client: nil) == nil)
            #expect(try await refresh([], client: FlowTestBed.app) == nil)
            #expect(try await refresh([], client: "another-app") ?? (0, nil) == (400, "invalid_grant"))
            #expect(try await refresh([], client: nil, at: "other") ?? (0, nil) == (400, "invalid_grant"))
            #expect(try await refresh([("scope", "email")], client: nil) == nil)
            #expect(try await refresh([("scope", "drive")], client: nil) ?? (0, nil) == (400, "invalid_scope"))

            // Due: the provider refreshes it, and the client keeps its refresh token.
            bed.clock.advance(by: 3600)
            let fresh = try await refreshGrant(token).carryOut("idp", nil)
            #expect(fresh.token == token && fresh.session.accessToken != redeemed.session.accessToken && bed.provider.accepts(fresh.session.accessToken))
            #expect(bed.provider.refreshes == 1)

            #expect(await Self.refusal(try refreshGrant("tbs_unknown")) ?? (0, nil) == (400, "invalid_grant"))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aCodeRedeemedWithAProofBindsTheSessionAndItsRefreshesToThatKey(_ kind: StoreKind) async throws {
        let bed = try await FlowTestBed(kind)
        try await bed.closing {
            let grants = Self.grants(bed)
            let vectors = DPoPProofTests.vectors.proofs
            try #require(vectors.count >= 2)
            let proof = try DPoPProofTests.check(vectors[0].proof, token: nil)
            let another = try DPoPProofTests.check(vectors[1].proof, token: nil)
            let verifier = PKCE.makeVerifier()
            let code = try #require(try await bed.signIn(verifier: verifier).handoffCode)
            let grant = try grants.grant(try Self.form([("grant_type", "authorization_code"), ("code", code), ("code_verifier", verifier),
                                                        ("redirect_uri", FlowTestBed.redirectURI)]), client: Self.client(FlowTestBed.app))
            let granted = try await grant.carryOut("idp", proof)
            let token = try #require(granted.token)
            #expect(granted.session.keyThumbprint == vectors[0].thumbprint)
            #expect(try await bed.stored(granted.session.id)?.keyThumbprint == vectors[0].thumbprint, "the binding is kept with the session")

            func refresh(_ proof: DPoPProof?) async throws -> (Int, String?)? {
                let grant = try grants.grant(try Self.form([("grant_type", "refresh_token"), ("refresh_token", token)]), client: Self.client(nil))
                return await Self.refusal(grant, proof: proof)
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
            let devices = bed.services.devices
            let grants = Self.grants(bed)
            let codes = try await devices.start(app: FlowTestBed.app, provider: ScriptedProvider.config(), scopes: [])
            let form = try Self.form([("grant_type", DeviceCodeGrant.type), ("device_code", codes.deviceCode)])
            let grant = try grants.grant(form, client: Self.client(FlowTestBed.app))
            #expect(await Self.refusal(grant) ?? (0, nil) == (400, "authorization_pending"))

            let waiting = try #require(try await devices.find(typed: codes.userCode))
            let started = try await devices.signIn(waiting, at: try await bed.login.providers.resolve("idp"))
            let (code, state) = try bed.provider.signIn(started.location, subject: "alice")
            let pending = try #require(try await bed.login.takeLogin(state: state))
            _ = await bed.login.complete(pending, state: state, with: CallbackAnswer(code: code, error: nil, errorDescription: nil, issuer: nil))
            #expect(try await devices.confirm(OpaqueToken.hash(codes.deviceCode), state: state, approve: true))
            bed.clock.advance(by: codes.interval)

            #expect(await Self.refusal(grant, at: "other") ?? (0, nil) == (400, "invalid_grant"), "another issuer's endpoint gets nothing")
            bed.clock.advance(by: codes.interval)
            #expect(await Self.refusal(grant) ?? (0, nil) == (400, "invalid_grant"), "the code was spent by the refused collection")

            #expect(throws: HTTPError.self) { try grants.grant(form, client: Self.client(nil)) }
        }
    }

    /// What the per-address limit charges (``GrantLimit``) is what RFC 6749 and RFC 8628 call
    /// a code that does not work and what a device is told at most once: every refusal, by the
    /// error code the endpoints answer it with.
    @Test func theLimitChargesTheRefusalsThatLookLikeGuessing() {
        let failure = ProviderCallError.oauth(code: "invalid_grant", description: nil, status: 400)
        let refusals: [GrantRefusal] = [
            .invalidGrant("x"), .invalidScope("x"), .invalidProof("x", reason: "dpop_proof_invalid"), .nonceRequired(nonce: "n"),
            .handoff(.unknownCode), .handoff(.replayed), .handoff(.wrongClient), .handoff(.malformedVerifier), .handoff(.wrongVerifier),
            .handoff(.sessionGone), .handoff(.refusedTooOften), .handoff(.signedOut), .handoff(.unsaved),
            .device(.unknownCode), .device(.used), .device(.expired), .device(.pending), .device(.slowDown(interval: 5)), .device(.denied),
            .device(.signedOut), .device(.unsaved),
            .refresh(.loginRequired), .refresh(.gone), .refresh(.failed(failure)), .refresh(.tooSoon(retryAfter: 1)), .refresh(.unsaved),
            .unreadable(StateReadError(description: "x")), .unsaved(StateWriteError(description: "x")),
        ]
        let guessing: Set = ["invalid_grant", "slow_down", "access_denied", "expired_token"]
        for refusal in refusals where !refusal.isRefresh {
            #expect(refusal.looksLikeGuessing == guessing.contains(refusal.httpError.code), "\(refusal) answered \(refusal.httpError.code)")
        }
        #expect(refusals.filter(\.looksLikeGuessing).count == 14)
        #expect(refusals.allSatisfy { !$0.isRefresh || !$0.looksLikeGuessing }, "a refresh is never limited per address")
    }
}

private extension GrantRefusal {
    var isRefresh: Bool {
        if case .refresh = self { true } else { false }
    }
}
