import BrokerCore
import Foundation
import Testing

/// Fetching, caching, refetching on an unknown kid, and its rate limit, counted at the source.
struct IDTokenJWKSCacheTests {
    private struct Fixture {
        let source: CountingJWKSSource
        let clock: TestClock
        let verifier: IDTokenVerifier

        init(document: String = "jwks.json", delay: Duration = .zero) throws {
            source = CountingJWKSSource(document: try IDTokenVectors.text(document), delay: delay)
            // Far from the timed vectors, before every valid token's exp.
            clock = TestClock(Date(timeIntervalSince1970: 2_000_000_000))
            let cache = JWKSCache(minimumRefetchInterval: .seconds(60), clock: clock.closure, fetch: source.fetch)
            verifier = IDTokenVerifier(jwks: cache, clock: clock.closure)
        }

        func error(_ name: String) async throws -> IDTokenError? {
            await verificationError(verifier, try IDTokenVectors.token(name))
        }
    }

    @Test func firstUseFetchesOnceThenTheSetIsCached() async throws {
        let fixture = try Fixture()
        #expect(fixture.source.fetches == 0)
        for _ in 0..<3 { #expect(try await fixture.error("valid-rs256") == nil) }
        #expect(try await fixture.error("valid-es256") == nil)
        #expect(fixture.source.fetches == 1)
    }

    @Test func unknownKidRefetchesOnceAndFindsTheRotatedKey() async throws {
        let fixture = try Fixture()
        #expect(try await fixture.error("valid-rs256") == nil)
        fixture.source.serve(try IDTokenVectors.text("jwks-rotated.json"))
        fixture.clock.advance(by: 61)
        #expect(try await fixture.error("rotated-ps256") == nil)
        #expect(fixture.source.fetches == 2)
        #expect(try await fixture.error("rotated-ps256") == nil)
        #expect(fixture.source.fetches == 2)
    }

    @Test func noRefetchWithinTheIntervalOfTheLastFetch() async throws {
        let fixture = try Fixture()
        #expect(try await fixture.error("valid-rs256") == nil)
        fixture.source.serve(try IDTokenVectors.text("jwks-rotated.json"))
        fixture.clock.advance(by: 59)
        #expect(try await fixture.error("rotated-ps256") == .unknownKey)
        #expect(fixture.source.fetches == 1)
        fixture.clock.advance(by: 1)
        #expect(try await fixture.error("rotated-ps256") == nil)
        #expect(fixture.source.fetches == 2)
    }

    @Test func floodOfBogusKidsFetchesAtMostOncePerInterval() async throws {
        let fixture = try Fixture()
        #expect(try await fixture.error("valid-rs256") == nil)
        fixture.clock.advance(by: 61)
        for _ in 0..<50 { #expect(try await fixture.error("unknown-kid") == .unknownKey) }
        #expect(fixture.source.fetches == 2)

        let token = try IDTokenVectors.token("unknown-kid")
        let verifier = fixture.verifier
        let errors = await withTaskGroup(of: IDTokenError?.self) { group in
            for _ in 0..<50 { group.addTask { await verificationError(verifier, token) } }
            return await group.reduce(into: [IDTokenError?]()) { $0.append($1) }
        }
        #expect(errors.count == 50 && errors.allSatisfy { $0 == .unknownKey })
        #expect(fixture.source.fetches == 2)

        fixture.clock.advance(by: 60)
        #expect(try await fixture.error("unknown-kid") == .unknownKey)
        #expect(try await fixture.error("unknown-kid") == .unknownKey)
        #expect(fixture.source.fetches == 3)
        #expect(try await fixture.error("valid-rs256") == nil)
        #expect(fixture.source.fetches == 3)
    }

    @Test func concurrentCallersShareOneFetch() async throws {
        let fixture = try Fixture(delay: .milliseconds(200))
        let token = try IDTokenVectors.token("valid-rs256")
        let verifier = fixture.verifier
        let errors = await withTaskGroup(of: IDTokenError?.self) { group in
            for _ in 0..<20 { group.addTask { await verificationError(verifier, token) } }
            return await group.reduce(into: [IDTokenError?]()) { $0.append($1) }
        }
        #expect(errors.count == 20 && errors.allSatisfy { $0 == nil })
        #expect(fixture.source.fetches == 1)
    }

    @Test func keySetWithOnlyUnusableKeysIsReadableButEmpty() async throws {
        let document = """
            {"keys": [
              {"kty": "oct", "kid": "rsa-1", "alg": "HS256", "k": "c2VjcmV0"},
              {"kty": "RSA", "kid": "rsa-1", "use": "enc", "n": "AQAB", "e": "AQAB"},
              {"kty": "RSA", "kid": "rsa-1", "key_ops": ["encrypt"], "n": "AQAB", "e": "AQAB"},
              {"kty": "EC", "kid": "rsa-1", "crv": "secp256k1", "x": "AA", "y": "AA"},
              {"kty": "RSA", "kid": "rsa-1", "alg": "RSA-OAEP", "n": "AQAB", "e": "AQAB"},
              {"kty": "RSA", "kid": "rsa-1", "alg": "RS256", "n": "AQAB"},
              {"kty": "EC", "kid": "rsa-1", "crv": "P-256", "x": "AAAA", "y": "AAAA"}
            ]}
            """
        let verifier = IDTokenVerifier(jwks: JWKSCache(staticJWKS: document))
        #expect(await verificationError(verifier, try IDTokenVectors.token("valid-rs256")) == .unknownKey)
    }

    @Test func octKeyInTheSetDoesNotSpoilTheOtherKeys() async throws {
        // jwks.json holds an oct key and an encryption key beside the signing keys: each is left
        // out, never the whole document with it.
        let fixture = try Fixture()
        #expect(try await fixture.error("valid-rs256") == nil)
        #expect(try await fixture.error("rs256-kid-oct") == .unknownKey)
        #expect(try await fixture.error("hs256-oct") == .algorithmNotAllowed("HS256"))
    }

    @Test func failedFirstFetchIsUnavailableAndTriedAgainNextTime() async throws {
        let fixture = try Fixture()
        fixture.source.fail(true)
        let error = try await fixture.error("valid-rs256")
        #expect(error == .jwksUnavailable("the test source is down"))
        #expect(error?.isKeySetUnavailable == true)
        fixture.source.fail(false)
        #expect(try await fixture.error("valid-rs256") == nil)
        #expect(fixture.source.fetches == 2)
    }

    @Test func failedRefetchAfterAMissIsUnavailable() async throws {
        let fixture = try Fixture()
        #expect(try await fixture.error("valid-rs256") == nil)
        fixture.source.fail(true)
        fixture.clock.advance(by: 61)
        #expect(try await fixture.error("unknown-kid")?.isKeySetUnavailable == true)
        #expect(try await fixture.error("valid-rs256") == nil)
    }

    @Test func setOlderThanAnHourIsRefreshedAndKeptWhenTheRefreshFails() async throws {
        let fixture = try Fixture()
        #expect(try await fixture.error("valid-rs256") == nil)
        fixture.clock.advance(by: 3599)
        #expect(try await fixture.error("valid-rs256") == nil)
        #expect(fixture.source.fetches == 1)
        fixture.clock.advance(by: 1)
        fixture.source.fail(true)
        #expect(try await fixture.error("valid-rs256") == nil)
        #expect(fixture.source.fetches == 2)
        fixture.clock.advance(by: 10)
        #expect(try await fixture.error("valid-rs256") == nil)
        #expect(fixture.source.fetches == 2)
    }

    @Test func eachURIHasItsOwnSet() async throws {
        let fixture = try Fixture()
        let token = try IDTokenVectors.token("valid-rs256")
        for path in ["a", "b", "a"] {
            let uri = IDTokenVectors.uri.appending(path: path)
            #expect(await verificationError(fixture.verifier, token, jwksURI: uri) == nil)
        }
        #expect(fixture.source.fetches == 2)
    }

    @Test func documentThatIsNotAKeySetIsUnavailable() async throws {
        for document in ["not json", "[]", #"{"keys": {}}"#, #"{"key": []}"#] {
            let verifier = IDTokenVerifier(jwks: JWKSCache(staticJWKS: document))
            let error = await verificationError(verifier, try IDTokenVectors.token("valid-rs256"))
            #expect(error?.isKeySetUnavailable == true)
            #expect(error?.description.contains(document) == false)
        }
    }
}
