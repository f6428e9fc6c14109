import JWTKit
#if canImport(WireValues)
import WireValues
#endif

/// A JWT payload as jwt-kit hands it over after the signature checked out: every claim, as JSON.
///
/// Its `verify(using:)` checks nothing on purpose: `IDTokenVerifier` checks the claims itself, so
/// that each failure has its own `IDTokenError`.
struct SignedPayload: JWTPayload {
    let claims: JSONValue

    /// Claims to sign (the development provider's logout tokens).
    init(_ claims: JSONValue) {
        self.claims = claims
    }

    init(from decoder: any Decoder) throws {
        claims = try JSONValue(from: decoder)
    }

    func encode(to encoder: any Encoder) throws {
        try EncodableJSON(claims).encode(to: encoder)
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Writes a `JSONValue` through an `Encoder`; `JWTPayload` is `Codable`, and `JSONValue` is
/// only `Decodable`.
private struct EncodableJSON: Encodable {
    let value: JSONValue

    init(_ value: JSONValue) {
        self.value = value
    }

    func encode(to encoder: any Encoder) throws {
        switch value {
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for element in values { try container.encode(EncodableJSON(element)) }
        case .object(let members):
            var container = encoder.container(keyedBy: Key.self)
            for (name, element) in members { try container.encode(EncodableJSON(element), forKey: Key(name)) }
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let flag):
            var container = encoder.singleValueContainer()
            try container.encode(flag)
        case .int(let number):
            var container = encoder.singleValueContainer()
            try container.encode(number)
        case .double(let number):
            var container = encoder.singleValueContainer()
            try container.encode(number)
        case .string(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        }
    }

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
