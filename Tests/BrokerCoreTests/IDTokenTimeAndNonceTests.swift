import BrokerCore
import Foundation
import Testing

/// `exp`, `iat`, `nbf` against an injected clock, and the nonce.
struct IDTokenTimeAndNonceTests {
    private func verifier(at date: Date, skew: Duration = .seconds(60)) throws -> IDTokenVerifier {
        let clock = TestClock(date)
        let cache = JWKSCache(staticJWKS: try IDTokenVectors.text("jwks.json"))
        return IDTokenVerifier(jwks: cache, clockSkew: skew, clock: clock.closure)
    }

    private func timedError(at date: Date, skew: Duration = .seconds(60)) async throws -> IDTokenError? {
        await verificationError(try verifier(at: date, skew: skew), try IDTokenVectors.token("timed"))
    }

    @Test func expiryWithinTheSkewStillPasses() async throws {
        let expiry = IDTokenVectors.timedExpiry
        #expect(try await timedError(at: expiry.addingTimeInterval(-1)) == nil)
        #expect(try await timedError(at: expiry.addingTimeInterval(59)) == nil)
    }

    @Test func expiryBeyondTheSkewIsExpired() async throws {
        let expiry = IDTokenVectors.timedExpiry
        #expect(try await timedError(at: expiry.addingTimeInterval(60)) == .expired)
        #expect(try await timedError(at: expiry.addingTimeInterval(3600)) == .expired)
    }

    @Test func zeroSkewExpiresAtExp() async throws {
        let expiry = IDTokenVectors.timedExpiry
        #expect(try await timedError(at: expiry.addingTimeInterval(-0.5), skew: .zero) == nil)
        #expect(try await timedError(at: expiry, skew: .zero) == .expired)
    }

    @Test func issueTimeWithinTheSkewPasses() async throws {
        #expect(try await timedError(at: IDTokenVectors.timedIssuedAt.addingTimeInterval(-60)) == nil)
    }

    @Test func issueTimeBeyondTheSkewIsInTheFuture() async throws {
        #expect(try await timedError(at: IDTokenVectors.timedIssuedAt.addingTimeInterval(-61)) == .issuedInTheFuture)
        let farIAT = try IDTokenVectors.token("iat-future")
        #expect(await verificationError(try verifier(at: Date()), farIAT) == .issuedInTheFuture)
    }

    @Test func notBeforeInTheFutureIsNotYetValid() async throws {
        let token = try IDTokenVectors.token("nbf-future")
        #expect(await verificationError(try verifier(at: Date()), token) == .notYetValid)
        let later = IDTokenVectors.farFuture.addingTimeInterval(-3600)
        #expect(await verificationError(try verifier(at: later), token) == nil)
    }

    @Test func expiryIsCheckedAfterTheAudience() async throws {
        // Order of checks: a token both for someone else and expired reports the audience.
        let late = IDTokenVectors.timedExpiry.addingTimeInterval(3600)
        let error = await verificationError(try verifier(at: late), try IDTokenVectors.token("timed"), clientID: "other")
        #expect(error == .wrongAudience)
    }

    @Test func differentNonceIsAMismatch() async throws {
        let token = try IDTokenVectors.token("valid-rs256")
        #expect(await verificationError(try verifier(at: Date()), token, nonce: "another-nonce") == .nonceMismatch)
        #expect(await verificationError(try verifier(at: Date()), token, nonce: IDTokenVectors.nonce + "x") == .nonceMismatch)
        #expect(await verificationError(try verifier(at: Date()), token, nonce: "") == .nonceMismatch)
    }

    @Test func missingNonceIsAMismatchWhenOneIsExpected() async throws {
        let token = try IDTokenVectors.token("no-nonce")
        #expect(await verificationError(try verifier(at: Date()), token) == .nonceMismatch)
    }

    @Test func noExpectedNonceAcceptsEither() async throws {
        let verifier = try verifier(at: Date())
        let withNonce = try await verification(verifier, try IDTokenVectors.token("valid-rs256"), nonce: nil).get()
        #expect(withNonce.nonce == IDTokenVectors.nonce)
        let withoutNonce = try await verification(verifier, try IDTokenVectors.token("no-nonce"), nonce: nil).get()
        #expect(withoutNonce.nonce == nil)
    }
}
