/// CRC-32C (Castagnoli, as in iSCSI, ext4 and LevelDB's log), the checksum of each state-file
/// frame's length and type. Unlike the frame's AES-GCM tag it can be checked before the length
/// is trusted, and, as every 32-bit CRC does, it detects every flipped bit and every burst of
/// errors up to 32 bits long, so that a damaged length is never taken for a frame a crash cut
/// short.
enum CRC32C {
    private static let table: [UInt32] = (0..<256).map { byte in
        var crc = UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        return crc
    }

    static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
