import BrokerCrypto
import Foundation
import HTTPServer
import WireValues

/// Values a browser carries that only this broker can make: keyed hashes (HMAC-SHA256) of a
/// purpose and a value, under a key derived from the state keys, so that every instance sharing
/// them makes and accepts the same tags (in development mode without keys, a key of the process).
/// The device pages' CSRF token is the tag of the browser's cookie, not the cookie again (a
/// page that can read the form but not the cookie cannot forge another); a device login's cookie is the
/// tag of its `state`, so that only the browser that decided can finish it (``DeviceRoutes``).
struct BrowserBinding: Sendable {
    /// The current key first; tags made under older keys still pass during a rotation.
    private let keys: [[UInt8]]

    /// Keys derived from `stateKeys` (never the state keys themselves), or a random one.
    init(stateKeys: StateKeys?) {
        guard let stateKeys else {
            keys = [SecureRandom.bytes(count: 32)]
            return
        }
        keys = stateKeys.all.map { key in
            key.withUnsafeBytes { HMACSHA256.authenticationCode(for: "token-broker browser binding v1", key: Array($0)) }
        }
    }

    /// The tag of `value` for `purpose`, as 43 base64url characters.
    func tag(_ purpose: String, _ value: String) -> String {
        Self.tag(purpose, value, key: keys[0])
    }

    /// Whether `tag` is the tag of `value` for `purpose` under any of the keys.
    func accepts(_ tag: String, _ purpose: String, _ value: String) -> Bool {
        keys.contains { constantTimeEquals(Self.tag(purpose, value, key: $0), tag) }
    }

    private static func tag(_ purpose: String, _ value: String, key: [UInt8]) -> String {
        Base64URL.encode(HMACSHA256.authenticationCode(for: purpose + "\u{0}" + value, key: key))
    }

    /// The value of the cookie `name` in `request`, if it has one of `length` characters.
    static func cookie(_ name: String, in request: Request, length: Int = 43) -> String? {
        guard let value = cookieValue(name, in: request), value.utf8.count == length, Base64URL.decode(value)?.count == 32 else { return nil }
        return value
    }

    /// The value of the cookie `name` in `request`, as it is.
    static func cookieValue(_ name: String, in request: Request) -> String? {
        guard let header = request.header("Cookie") else { return nil }
        for pair in header.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == name else { continue }
            return parts[1].trimmingCharacters(in: .whitespaces)
        }
        return nil
    }
}
