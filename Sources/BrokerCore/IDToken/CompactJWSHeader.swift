import Foundation
#if canImport(WireValues)
import WireValues
#endif

/// What the verifier reads from a compact JWS (RFC 7515 §7.1) before it trusts anything: the
/// shape `header.payload.signature` in base64url, and the header's `alg` and `kid`.
///
/// Header members that point at other keys (`jku`, `jwk`, `x5u`, `x5c`) are ignored: keys come
/// only from the provider's configured key set. A `crit` member is refused, since no extension
/// is understood here (RFC 7515 §4.1.11).
struct CompactJWSHeader: Sendable {
    /// Larger than any ID token a provider issues; stops work on absurd input early.
    static let maximumTokenBytes = 65_536

    /// The `alg` header member, as written.
    let algorithm: String
    /// The `kid` header member, when present.
    let keyID: String?
    /// The `typ` header member (the kind of token), when present.
    let type: String?

    init(of token: String) throws(IDTokenError) {
        let bytes = token.utf8
        guard bytes.count <= Self.maximumTokenBytes else { throw .malformed }
        let segments = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3, !segments[0].isEmpty, !segments[1].isEmpty,
              segments.allSatisfy({ $0.allSatisfy(Self.isBase64URL) }),
              let headerBytes = Self.base64URLDecoded(segments[0]),
              let header = try? JSONValue.parse(headerBytes),
              case .object = header,
              let algorithm = header["alg"]?.stringValue
        else { throw .malformed }
        if let kid = header["kid"], kid.stringValue == nil { throw .malformed }
        if let typ = header["typ"], typ.stringValue == nil { throw .malformed }
        if header["crit"] != nil { throw .malformed }
        self.algorithm = algorithm
        self.keyID = header["kid"]?.stringValue
        self.type = header["typ"]?.stringValue
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }

    /// Unpadded base64url (RFC 7515 §2) to bytes; nil when the length cannot be base64.
    private static func base64URLDecoded(_ segment: Substring.UTF8View) -> [UInt8]? {
        var text = String(decoding: segment, as: UTF8.self)
            .replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        switch text.utf8.count % 4 {
        case 0: break
        case 2: text += "=="
        case 3: text += "="
        default: return nil
        }
        return Data(base64Encoded: text).map { [UInt8]($0) }
    }
}
