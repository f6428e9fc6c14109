public import BrokerCrypto

/// The keys that encrypt the broker's state on disk: the current key, which encrypts everything
/// written from now on, and older keys still accepted for reading, so that a new key can be
/// introduced while files written under the old one are still read (key rotation).
///
/// Each key has a key id: the first 8 bytes of the SHA-256 of its bytes, read as a big-endian
/// integer. A file names the key it was written with by this id; the id reveals nothing about
/// the key.
///
/// Printing never shows a key: `description`, `debugDescription`, `dump` and the default
/// printing of a struct that holds it give only the number of keys and the current key id,
/// such as `StateKeys(<redacted>, 2 keys, current id 66687aadf862bd77)`.
public struct StateKeys: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable {
    /// The key that encrypts what is written from now on.
    public let current: SymmetricKey
    /// The key id of ``current``.
    public let currentID: UInt64
    /// Every key, ``current`` first, then the older ones in the order they were given.
    public let all: [SymmetricKey]
    /// The key id of each key in ``all``, in the same order.
    public let ids: [UInt64]

    /// Creates a key set from the current key and the older keys still accepted for reading.
    /// An older key whose id is already in the set (the same key given twice) is left out.
    public init(current: SymmetricKey, older: [SymmetricKey] = []) {
        var all = [current]
        var ids = [Self.id(of: current)]
        for key in older {
            let id = Self.id(of: key)
            if !ids.contains(id) {
                all.append(key)
                ids.append(id)
            }
        }
        self.current = current
        self.currentID = ids[0]
        self.all = all
        self.ids = ids
    }

    /// The key whose key id is `id`, or `nil` when none is (the file was written under a key
    /// that is no longer configured).
    public func key(id: UInt64) -> SymmetricKey? {
        ids.firstIndex(of: id).map { all[$0] }
    }

    /// The key id of `key`: the first 8 bytes of SHA-256 of its 32 bytes, big-endian.
    public static func id(of key: SymmetricKey) -> UInt64 {
        let digest = key.withUnsafeBytes { SHA256.hash($0) }
        return digest.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) }
    }

    /// A key id as 16 lowercase hexadecimal digits, as messages and file headers show it.
    public static func hex(id: UInt64) -> String {
        let digits = String(id, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// Whether both sets hold the same keys in the same order. Key bytes are compared in
    /// constant time.
    public static func == (lhs: StateKeys, rhs: StateKeys) -> Bool {
        guard lhs.ids == rhs.ids else { return false }
        return zip(lhs.all, rhs.all).allSatisfy { left, right in
            left.withUnsafeBytes { a in right.withUnsafeBytes { b in constantTimeEquals(a, b) } }
        }
    }

    /// `StateKeys(<redacted>, N keys, current id HEX)`.
    public var description: String {
        "StateKeys(<redacted>, \(all.count) key\(all.count == 1 ? "" : "s"), current id \(Self.hex(id: currentID)))"
    }

    /// The same as ``description``: no key is ever shown.
    public var debugDescription: String { description }

    /// A mirror with no children, so that `dump` and reflection cannot reach the keys.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
