import Synchronization

/// Request ids: the client's `X-Request-Id` when it is short and plain, otherwise a fresh one
/// (a random per-process prefix and a counter: unique, cheap, and not a secret).
final class RequestIDs: Sendable {
    private let prefix = String(UInt32.random(in: 0x1000_0000...UInt32.max), radix: 16)
    private let counter = Atomic<UInt64>(0)

    func make(clientSupplied: String?) -> String {
        if let clientSupplied, Self.isAcceptable(clientSupplied) { return clientSupplied }
        let number = counter.wrappingAdd(1, ordering: .relaxed).newValue
        return prefix + "-" + String(number, radix: 16)
    }

    /// 1 to 64 characters of `[A-Za-z0-9._-]`.
    static func isAcceptable(_ id: String) -> Bool {
        let utf8 = id.utf8
        return (1...64).contains(utf8.count) && utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }
}
