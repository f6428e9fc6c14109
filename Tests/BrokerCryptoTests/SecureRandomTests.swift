import BrokerCrypto
import Testing

struct SecureRandomTests {
    @Test(arguments: [0, 1, 12, 32, 1000, 1 << 20])
    func requestedLength(count: Int) {
        #expect(SecureRandom.bytes(count: count).count == count)
    }

    @Test func successiveCallsDiffer() {
        // Two equal 32-byte draws happen with probability 2^-256: a match means a broken RNG.
        let draws = (0..<100).map { _ in SecureRandom.bytes(count: 32) }
        #expect(Set(draws).count == draws.count)
        #expect(!draws.contains([UInt8](repeating: 0, count: 32)))
    }

    @Test func fillOverwritesTheWholeBuffer() {
        var first = [UInt8](repeating: 0, count: 64)
        var second = [UInt8](repeating: 0, count: 64)
        first.withUnsafeMutableBytes { SecureRandom.fill($0) }
        second.withUnsafeMutableBytes { SecureRandom.fill($0) }
        #expect(first != second)
        // Each half would stay all-zero with probability 2^-256 if it were really filled.
        #expect(first[..<32].contains { $0 != 0 } && first[32...].contains { $0 != 0 })
        var empty: [UInt8] = []
        empty.withUnsafeMutableBytes { SecureRandom.fill($0) }
        #expect(empty.isEmpty)
    }

    @Test func bytesLookUniform() {
        // Every byte value should appear in 1 MiB (expected 4096 times each); catches a
        // generator stuck on a subset of values.
        var counts = [Int](repeating: 0, count: 256)
        for byte in SecureRandom.bytes(count: 1 << 20) { counts[Int(byte)] += 1 }
        #expect(counts.allSatisfy { $0 > 3000 && $0 < 5200 })
    }
}
