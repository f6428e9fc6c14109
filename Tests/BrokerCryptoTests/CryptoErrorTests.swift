import BrokerCrypto
import Testing

struct CryptoErrorTests {
    @Test func descriptionsAreShortAndFixed() {
        #expect(CryptoError.invalidKeyLength.description == "invalid key length")
        #expect(CryptoError.invalidNonceLength.description == "invalid nonce length")
        #expect(CryptoError.authenticationFailure.description == "authentication failure")
        #expect(CryptoError.malformedSealedBox.description == "malformed sealed box")
        #expect(CryptoError.libraryFailure.description == "crypto library failure")
        #expect(String(describing: CryptoError.authenticationFailure) == "authentication failure")
    }

    @Test func equality() {
        let all: [CryptoError] = [
            .invalidKeyLength, .invalidNonceLength, .authenticationFailure, .malformedSealedBox,
            .libraryFailure,
        ]
        #expect(Set(all).count == all.count)
        #expect(CryptoError.authenticationFailure == .authenticationFailure)
    }

    @Test func thrownErrorIsTyped() throws {
        do {
            _ = try SymmetricKey(bytes: [1, 2, 3])
            Issue.record("expected an error")
        } catch {
            // `error` is statically a CryptoError thanks to typed throws.
            #expect(error == .invalidKeyLength)
        }
    }
}
