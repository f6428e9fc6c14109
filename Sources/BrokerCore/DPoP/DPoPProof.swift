import BrokerCrypto
import Foundation
import WireValues

/// A DPoP proof (RFC 9449 §4) checked for one request, as §4.3 lists: a compact JWS of type
/// `dpop+jwt`, signed with an asymmetric algorithm by the public key in its own `jwk` header
/// (never a private one), for this request's method (`htm`) and URL (`htu`), made within the
/// accepted window (`iat`), with a `jti`, and — where a token is presented — the hash of that
/// token (`ath`). Whether its `jti` was seen before is the ``ReplayMemory``'s to say.
struct DPoPProof: Sendable {
    /// The thumbprint of the key that signed it (``ProofKey/thumbprint``).
    let thumbprint: String
    /// What its `jti` is remembered by: the key's thumbprint and the `jti`, hashed, so that two
    /// keys' `jti`s never collide and the store keeps no client's value.
    let replayID: SHA256Digest
    /// Until when its `jti` is to be remembered: past it, `iat` puts the proof outside the window.
    let rememberUntil: Double
    /// Its `nonce` claim, when it has one (``DPoPNonces``).
    let nonce: String?

    /// Larger than any proof a client makes (an RSA-4096 key and the claims fit in 2 KiB).
    static let maximumBytes = 8192
    /// How old a proof may be (RFC 9449 §11.1 leaves it to the server: a minute is common).
    static let acceptedAge = 60.0
    /// How far ahead of the broker's clock a client's may run.
    static let clockSkew = 10.0
    /// The algorithms accepted, as the metadata's `dpop_signing_alg_values_supported` lists them.
    static let accepted: [VerificationKey.Algorithm] = [.es256, .es384, .rs256, .ps256, .edDSA]
    static let algorithms = accepted.map(\.rawValue)
    static let algorithmNames = algorithms.joined(separator: " ")

    /// Checks `text` as the proof of a request with `method` to `url`, presenting the token
    /// whose SHA-256 is `tokenHash` (nil at a token endpoint, where no token is presented), at
    /// `now`; the key its header carries comes from `keys`.
    init(_ text: String, method: String, url: ProofURL, tokenHash: SHA256Digest?, now: Double, keys: ProofKeys) throws(DPoPProofError) {
        guard text.utf8.count <= Self.maximumBytes else { throw .malformed("it is longer than \(Self.maximumBytes) bytes") }
        let segments = text.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3, let claimBytes = Base64URL.decode(segments[1]), let signature = Base64URL.decode(segments[2]),
              let claims = try? JSONValue.parse(claimBytes), case .object = claims
        else { throw .malformed("it is not a compact JWS with JSON header and claims") }
        let key = try keys.key(ofHeader: segments[0])
        guard key.key.isValid(signature, of: text[..<segments[2].startIndex].dropLast()) else { throw .badSignature }

        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= 256 else { throw .malformed("jti is missing") }
        guard claims["htm"]?.stringValue == method else { throw .wrongMethod }
        guard let htu = claims["htu"]?.stringValue, url.matches(htu) else { throw .wrongURL }
        let issuedAt: Double
        switch claims["iat"] {
        case .int(let seconds)?: issuedAt = Double(seconds)
        case .double(let seconds)?: issuedAt = seconds
        default: throw .malformed("iat is not a number")
        }
        guard issuedAt >= now - Self.acceptedAge, issuedAt <= now + Self.clockSkew else { throw .stale }
        if let tokenHash {
            guard let ath = claims["ath"]?.stringValue, ath == Base64URL.encode(tokenHash.bytes) else { throw .wrongTokenHash }
        }
        thumbprint = key.thumbprint
        replayID = SHA256.hash("dpop-jti:\(key.thumbprint):\(jti)")
        rememberUntil = issuedAt + Self.acceptedAge + Self.clockSkew
        nonce = claims["nonce"]?.stringValue
    }

    /// The key of a proof's header: its `typ`, `alg`, `crit` and `jwk` checked, the key built.
    static func key(ofHeader segment: Substring) throws(DPoPProofError) -> ProofKey {
        guard let bytes = Base64URL.decode(segment), let header = try? JSONValue.parse(bytes), case .object = header else {
            throw .malformed("it is not a compact JWS with JSON header and claims")
        }
        guard header["typ"]?.stringValue == "dpop+jwt" else { throw .wrongType }
        let alg = header["alg"]?.stringValue ?? "(none)"
        guard let algorithm = VerificationKey.Algorithm(rawValue: alg), Self.accepted.contains(algorithm) else {
            throw .unsupportedAlgorithm(alg)
        }
        guard header["crit"] == nil else { throw .malformed("crit names an extension the broker does not know") }
        guard let jwk = header["jwk"] else { throw .malformed("the header has no jwk") }
        return try ProofKey(jwk, algorithm: algorithm)
    }
}

/// An `htu` as RFC 9449 §4.3 compares it: scheme and host in lowercase, the scheme's default
/// port left out, the path as written, without query and fragment.
struct ProofURL: Sendable, Equatable {
    /// The URL in that form; nil for text that is no absolute http(s) URL.
    let normalized: String?

    init(_ text: String) {
        normalized = Self.normalize(text)
    }

    /// The URL of a request to `path` at the broker whose public URL, normalized, is `base`.
    init(base: ProofURL, path: Substring) {
        normalized = base.normalized.map { $0 + Self.normalizedEscapes(path) }
    }

    /// Whether the `htu` of a proof names this URL: written as the broker writes it (the usual
    /// case, compared as it is), or once normalized.
    func matches(_ htu: String) -> Bool {
        guard let normalized else { return false }
        return htu == normalized || Self.normalize(htu) == normalized
    }

    private static func normalize(_ text: String) -> String? {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
              let host = components.host?.lowercased(), !host.isEmpty
        else { return nil }
        let port = components.port.flatMap { ["http": 80, "https": 443][scheme] == $0 ? nil : $0 }
        let path = normalizedEscapes(Substring(components.percentEncodedPath))
        return "\(scheme)://\(host)\(port.map { ":\($0)" } ?? "")\(path == "/" ? "" : path)"
    }

    /// `path` with RFC 3986 §6.2.2's normalization of its escapes (RFC 9449 §4.3 compares `htu`
    /// so): an unreserved character's (ALPHA, DIGIT, `-._~`) decoded, any other's hexadecimal
    /// in capitals. A path without `%` is returned as it is.
    static func normalizedEscapes(_ path: Substring) -> String {
        guard path.utf8.contains(UInt8(ascii: "%")) else { return String(path) }
        let bytes = Array(path.utf8)
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                  let high = bytes[index + 1].hexDigitValue, let low = bytes[index + 2].hexDigitValue else {
                result.append(bytes[index])
                index += 1
                continue
            }
            let byte = high << 4 | low
            if isUnreserved(byte) {
                result.append(byte)
            } else {
                result += [UInt8(ascii: "%"), hexDigit(high), hexDigit(low)]
            }
            index += 3
        }
        return String(decoding: result, as: UTF8.self)
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
        }
    }
}
