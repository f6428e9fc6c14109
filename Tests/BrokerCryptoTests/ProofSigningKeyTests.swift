import BrokerCrypto
import Testing

struct ProofSigningKeyTests {
    /// RFC 7515 Appendix A.3's ES256 key.
    static let rfcKey = ProofSigningKey(bytes: Base64URL.decode("jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI")!
        + Base64URL.decode("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU")!
        + Base64URL.decode("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0")!)!

    private func verifies(_ signature: [UInt8], _ data: String, by key: ProofSigningKey) -> Bool {
        let public_ = VerificationKey(.es256, first: Base64URL.decode(key.x)!, second: Base64URL.decode(key.y)!)!
        return public_.isValid(signature, of: data)
    }

    @Test func aKnownKeysSignatureChecksWithItsPublicKey() throws {
        let data = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UifQ"
        let signature = try Self.rfcKey.sign(data)
        #expect(signature.count == 64)
        #expect(verifies(signature, data, by: Self.rfcKey))
        #expect(!verifies(signature, data + "x", by: Self.rfcKey))
        #expect(Self.rfcKey.x == "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU")
    }

    @Test func aNewKeyIsItsOwnAndSignsChecksAnotherCannotPass() throws {
        let key = try ProofSigningKey.generate()
        let other = try ProofSigningKey.generate()
        #expect(key != other)
        #expect(ProofSigningKey(bytes: key.bytes) == key)
        let signature = try key.sign("payload")
        #expect(verifies(signature, "payload", by: key))
        #expect(!verifies(signature, "payload", by: other))
    }

    @Test func bytesThatAreNoKeyAreRefusedAndNothingPrints() {
        #expect(ProofSigningKey(bytes: [UInt8](repeating: 1, count: 95)) == nil)
        #expect("\(Self.rfcKey)" == "ProofSigningKey(<redacted>)")
        let offCurve = ProofSigningKey(bytes: [UInt8](repeating: 0, count: 32) + [UInt8](repeating: 7, count: 64))!
        #expect(throws: CryptoError.libraryFailure) { try offCurve.sign("data") }
    }
}
