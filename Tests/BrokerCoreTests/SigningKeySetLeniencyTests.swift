import BrokerCrypto
import Testing
import WireValues

@testable import BrokerCore

/// Key sets as providers write them, beyond the vectors' form.
struct SigningKeySetLeniencyTests {
    @Test func paddedBase64URLMembersStillMakeAKey() throws {
        let document = try JSONValue.parse(Array(try IDTokenVectors.text("jwks.json").utf8))
        guard case .array(let keys)? = document["keys"], case .object(var rsa)? = keys.first(where: { $0["kid"] == .string("rsa-1") }) else {
            Issue.record("the vectors' rsa-1 key")
            return
        }
        rsa = rsa.map { member in
            let (name, value) = member
            guard name == "n" || name == "e", let text = value.stringValue else { return member }
            return (name, JSONValue.string(text + "=="))
        }
        let padded = try SigningKeySet.parse(JSONValue.object([("keys", .array([.object(rsa)]))]).serialized(), host: "idp")
        let key = try #require(padded.key(for: "rsa-1", algorithm: .rs256), "padding (which some providers write) drops no key")
        #expect((try? key.verifiedPayload(of: try IDTokenVectors.token("valid-rs256"), algorithm: .rs256)) != nil)
    }
}
