import BrokerCrypto
import Foundation
import Testing
import WireValues

@testable import BrokerCore

/// The broker's client assertions (`private_key_jwt`, RFC 7523) and the keys behind them, with
/// the test keys of Resources/client-keys (see make_vectors.py there).
struct ClientAssertionTests {
    static func pem(_ name: String) throws -> String {
        let file = try #require(
            Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Resources/client-keys")
                ?? Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "client-keys")
        )
        return try String(contentsOf: file, encoding: .utf8)
    }

    static func key(_ name: String, publicAllowed: Bool = false) throws -> ClientAssertionKey {
        try ClientAssertionKey.parse(pem: try pem(name), source: name, publicAllowed: publicAllowed).get()
    }

    static func signer(_ name: String, _ algorithm: SignatureAlgorithm? = nil, second: String? = nil) throws -> ClientAssertionSigner {
        try ClientAssertionSigner.make(signingKey: try key(name), algorithm: algorithm,
                                       secondKey: try second.map { try key($0, publicAllowed: true) }, audience: .issuer).get()
    }

    /// A compact JWS's header and claims, decoded without checking anything.
    static func parts(_ token: String) throws -> (header: JSONValue, claims: JSONValue) {
        let segments = token.split(separator: ".", omittingEmptySubsequences: false)
        try #require(segments.count == 3)
        return (try JSONValue.parse(try #require(Base64URL.decode(segments[0]))),
                try JSONValue.parse(try #require(Base64URL.decode(segments[1]))))
    }

    /// Checks `token`'s signature with the key set the broker publishes, as a provider would.
    static func verifies(_ token: String, with jwks: JSONValue, algorithm: SignatureAlgorithm, kid: String) async throws -> Bool {
        let keys = try SigningKeySet.parse(jwks.serialized(), host: "broker")
        guard let key = keys.key(for: kid, algorithm: algorithm) else { return false }
        return (try? key.verifiedPayload(of: token, algorithm: algorithm)) != nil
    }

    @Test func keyIDsAreRFC7638ThumbprintsAsAnotherImplementationComputesThem() throws {
        let expected = try JSONValue.parse(Array(try Self.pem("thumbprints.json").utf8))
        guard case .object(let members) = expected else { Issue.record("thumbprints.json is not an object"); return }
        #expect(members.count == 8)
        for (name, thumbprint) in members {
            #expect(try Self.key(name, publicAllowed: true).keyID == thumbprint.stringValue, "\(name)")
        }
        // Negative control: two different keys have different ids.
        #expect(try Self.key("rsa-pkcs8.pem").keyID != (try Self.key("rsa-second.pem").keyID))
    }

    @Test(arguments: ["rsa-1024.pem", "ec-p384.pem", "rsa-encrypted.pem", "thumbprints.json"])
    func unusableKeysAreRefusedWithoutShowingThem(_ name: String) throws {
        let text = try Self.pem(name)
        let result = ClientAssertionKey.parse(pem: text, source: name, publicAllowed: true)
        guard case .failure(let error) = result else { Issue.record("\(name) was accepted"); return }
        #expect(error.message.contains("RSA of 2048 bits or more, or EC P-256"))
        #expect(!error.message.contains("BEGIN") && !error.message.contains(String(text.dropFirst(40).prefix(20))))
    }

    @Test func aPublicKeyCannotSign() throws {
        guard case .failure(let error) = ClientAssertionKey.parse(pem: try Self.pem("rsa-public.pem"), source: "p", publicAllowed: false) else {
            Issue.record("a public key was taken as a signing key"); return
        }
        #expect(error.message.contains("is not a PEM private key"))
        #expect(try Self.key("rsa-public.pem", publicAllowed: true).keyID == (try Self.key("rsa-pkcs8.pem").keyID))
    }

    @Test(arguments: [("rsa-pkcs8.pem", SignatureAlgorithm.rs256), ("rsa-pkcs1.pem", .ps256), ("ec-pkcs8.pem", .es256), ("ec-sec1.pem", .es256)])
    func anAssertionHasTheClaimsAndHeaderAProviderChecks(_ name: String, _ algorithm: SignatureAlgorithm) async throws {
        let signer = try Self.signer(name, algorithm)
        let token = try signer.assertion(clientID: "broker-client", audience: "https://idp.example/", now: 1_800_000_000.7)
        let (header, claims) = try Self.parts(token)
        #expect(header["alg"]?.stringValue == algorithm.rawValue && header["kid"]?.stringValue == signer.signingKey.keyID)
        #expect(header["typ"]?.stringValue == "JWT")
        #expect(claims["iss"]?.stringValue == "broker-client" && claims["sub"]?.stringValue == "broker-client")
        #expect(claims["aud"]?.stringValue == "https://idp.example/")
        #expect(claims["iat"] == .int(1_800_000_000) && claims["exp"] == .int(1_800_000_060))
        #expect(try #require(claims["jti"]?.stringValue).count >= 22)
        #expect(try await Self.verifies(token, with: signer.jwks, algorithm: algorithm, kid: signer.signingKey.keyID))
        // Negative controls: another payload under the same signature, and another key, do not verify.
        let segments = token.split(separator: ".")
        let forged = [String(segments[0]), Base64URL.encode(Array(#"{"iss":"x","sub":"x","aud":"y","jti":"z","iat":1,"exp":2}"#.utf8)),
                      String(segments[2])].joined(separator: ".")
        #expect(try await !Self.verifies(forged, with: signer.jwks, algorithm: algorithm, kid: signer.signingKey.keyID))
        // Another key of the same kind published under this key's kid.
        let other = try Self.signer(algorithm == .es256 ? "ec-second.pem" : "rsa-second.pem", algorithm)
        guard case .array(let otherKeys)? = other.jwks["keys"], case .object(let members) = otherKeys[0] else { Issue.record("no key"); return }
        let impostor = JSONValue.object([("keys", .array([.object(members.map { $0.0 == "kid" ? ("kid", .string(signer.signingKey.keyID)) : $0 })]))])
        #expect(try await !Self.verifies(token, with: impostor, algorithm: algorithm, kid: signer.signingKey.keyID))
    }

    @Test func everyAssertionHasItsOwnJTI() async throws {
        let signer = try Self.signer("ec-pkcs8.pem")
        var seen = Set<String>()
        for _ in 0..<200 {
            let token = try signer.assertion(clientID: "c", audience: "a", now: 1_800_000_000)
            seen.insert(try #require(try Self.parts(token).claims["jti"]?.stringValue))
        }
        #expect(seen.count == 200)
    }

    @Test func theKeySetPublishesBothKeysOfARotationAndNoPrivatePart() throws {
        let signer = try Self.signer("rsa-pkcs8.pem", .ps256, second: "ec-public.pem")
        guard case .array(let keys)? = signer.jwks["keys"] else { Issue.record("no keys array"); return }
        #expect(keys.count == 2)
        #expect(keys[0]["kid"]?.stringValue == signer.signingKey.keyID && keys[0]["alg"]?.stringValue == "PS256")
        #expect(keys[0]["kty"]?.stringValue == "RSA" && keys[0]["use"]?.stringValue == "sig")
        #expect(keys[1]["kid"]?.stringValue == signer.secondKey?.keyID && keys[1]["alg"]?.stringValue == "ES256")
        #expect(keys[1]["crv"]?.stringValue == "P-256")
        for key in keys {
            for privateMember in ["d", "p", "q", "dp", "dq", "qi"] { #expect(key[privateMember] == nil) }
        }
        let alone = try Self.signer("rsa-pkcs8.pem")
        guard case .array(let single)? = alone.jwks["keys"] else { Issue.record("no keys array"); return }
        #expect(single.count == 1 && single[0]["alg"]?.stringValue == "RS256")
    }

    @Test func anAlgorithmMustFitTheKey() throws {
        let mismatched = ClientAssertionSigner.make(signingKey: try Self.key("rsa-pkcs8.pem"), algorithm: .es256, secondKey: nil, audience: .issuer)
        guard case .failure(let error) = mismatched else { Issue.record("ES256 with an RSA key was accepted"); return }
        #expect(error.message == "ES256 does not go with an RSA key (use RS256 or PS256)")
        #expect(throws: Never.self) { try Self.signer("ec-pkcs8.pem", .es256) }
    }

    @Test func aSigningKeyFileOthersCanReadIsReported() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("client-key-\(UUID().uuidString).pem").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = FileManager.default.createFile(atPath: path, contents: Data(try Self.pem("ec-pkcs8.pem").utf8), attributes: [.posixPermissions: 0o644])
        let key = try ClientAssertionKey.parse(pem: try Self.pem("ec-pkcs8.pem"), source: path, publicAllowed: false).get()
        let signer = try ClientAssertionSigner.make(signingKey: key, algorithm: nil, secondKey: nil, audience: .issuer).get()
        let provider = ProviderConfig(id: "corp", endpoints: .discovery(issuer: URL(string: "https://idp.example")!), clientID: "c",
                                      clientAuthentication: .privateKeyJWT(signer))
        #expect(ClientKeyPermissions.check([provider]) == [
            "the private key file \(path) of provider corp can be read by other users (mode 0644): make it 0400 or 0600 and owned by the broker's user",
        ])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        #expect(ClientKeyPermissions.check([provider]).isEmpty)

        // A rotation's second key, when it is the next private key, is checked as the signing one.
        let secondPath = path + ".next"
        defer { try? FileManager.default.removeItem(atPath: secondPath) }
        _ = FileManager.default.createFile(atPath: secondPath, contents: Data(try Self.pem("ec-pkcs8.pem").utf8), attributes: [.posixPermissions: 0o644])
        let next = try ClientAssertionKey.parse(pem: try Self.pem("ec-pkcs8.pem"), source: secondPath, publicAllowed: true).get()
        let rotating = try ClientAssertionSigner.make(signingKey: key, algorithm: nil, secondKey: next, audience: .issuer).get()
        let duringRotation = ProviderConfig(id: "corp", endpoints: .discovery(issuer: URL(string: "https://idp.example")!), clientID: "c",
                                            clientAuthentication: .privateKeyJWT(rotating))
        #expect(ClientKeyPermissions.check([duringRotation]) == [
            "the private key file \(secondPath) of provider corp can be read by other users (mode 0644): make it 0400 or 0600 and owned by the broker's user",
        ])
    }

    @Test func printingOrDumpingShowsNoKeyMaterial() throws {
        let signer = try Self.signer("rsa-pkcs8.pem", second: "rsa-second.pem")
        var dumped = ""
        dump(signer, to: &dumped)
        dump(signer.signingKey, to: &dumped)
        let material = try Self.pem("rsa-pkcs8.pem").split(separator: "\n")[1]
        for text in [dumped, "\(signer)", String(reflecting: signer), "\(signer.signingKey)"] {
            #expect(!text.contains(material) && !text.contains("BEGIN"), "\(text)")
        }
        // Exactly these, and a dump of one line each: nothing of the keys but their ids and files.
        let second = try #require(signer.secondKey)
        #expect("\(signer)" == "ClientAssertionSigner(RS256, kid \(signer.signingKey.keyID), second kid \(second.keyID), aud issuer)")
        #expect("\(signer.signingKey)" == "ClientAssertionKey(RSA, kid \(signer.signingKey.keyID), from \(signer.signingKey.source))")
        #expect(dumped.split(separator: "\n").count == 2, "\(dumped)")
    }
}
