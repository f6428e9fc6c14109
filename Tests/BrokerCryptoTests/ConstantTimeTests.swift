import BrokerCrypto
import Testing

struct ConstantTimeTests {
    @Test func bytes() {
        let secret = Array("client-secret-value".utf8)
        #expect(constantTimeEquals(secret, Array("client-secret-value".utf8)))
        #expect(!constantTimeEquals(secret, flippingBit(secret, at: 0)))
        #expect(!constantTimeEquals(secret, flippingBit(secret, at: secret.count - 1)))
        #expect(!constantTimeEquals(secret, Array(secret.dropLast())))
        #expect(!constantTimeEquals(secret, secret + [0]))
        #expect(!constantTimeEquals(secret, []))
        #expect(constantTimeEquals([], []))
    }

    @Test func rawBuffers() {
        let a: [UInt8] = [1, 2, 3, 4]
        let b: [UInt8] = [1, 2, 3, 5]
        a.withUnsafeBytes { a in
            b.withUnsafeBytes { b in
                #expect(constantTimeEquals(a, a))
                #expect(!constantTimeEquals(a, b))
                #expect(
                    constantTimeEquals(
                        UnsafeRawBufferPointer(rebasing: a[..<3]),
                        UnsafeRawBufferPointer(rebasing: b[..<3])))
            }
        }
    }

    @Test func strings() {
        #expect(constantTimeEquals("s3cr3t", "s3cr3t"))
        #expect(!constantTimeEquals("s3cr3t", "s3cr3T"))
        #expect(!constantTimeEquals("s3cr3t", "s3cr3"))
        let padded = "<s3cr3t>"
        #expect(constantTimeEquals(padded.dropFirst().dropLast(), "s3cr3t"))
        // Byte comparison: canonically equivalent but differently encoded strings differ.
        #expect("\u{e9}" == "e\u{301}")
        #expect(!constantTimeEquals("\u{e9}", "e\u{301}"))
    }
}
