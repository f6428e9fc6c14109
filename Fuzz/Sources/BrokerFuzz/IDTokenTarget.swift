// ID tokens and key sets: BrokerCore.IDTokenVerifier.verify with a JWKSCache(staticJWKS:).
//
// `idtoken`: the input is the token. First byte = mode, the rest:
//   mode 0  the token text itself (compact JWS);
//   mode 1  the payload JSON, signed ES256 with the fixed test key `fuzz-ec` under a fixed
//           header: the signature is valid, so the claim checks run on the fuzzer's JSON;
//   mode 2  header JSON, a NUL byte, payload JSON, signed with `fuzz-ec` (ES256), or with
//           `fuzz-rsa` (RS256) when bit 2 of the mode byte is set;
//   mode 3  the payload JSON signed RS256 with `fuzz-rsa` (PS256 when bit 2 is set).
// The key set is the main package's test vectors' jwks.json plus the two fuzz keys, so the
// vector tokens (seeds of mode 0) verify too.
//
// `jwks`: the input is the key set document; a fixed list of valid tokens (the vectors' RS256,
// ES256, EdDSA and kid-less tokens, and one ES256 token of `fuzz-ec`) is verified against it.
import BrokerCrypto
import Foundation
import BrokerCore

private let issuer = "https://idp.example.test"
private let clientID = "broker-client"
private let nonce = "n-0S6_WzA2Mj"
private let jwksURI = URL(string: "https://idp.example.test/jwks")!
private let now = 1_700_000_100.0

/// Test keys of the fuzz harness only; they sign nothing but fuzz inputs.
private let ecKey = PEMKey(pem: """
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgDHCPKdVdmK5fE81j
PZr1t1M++w59U4obDF4EmKrZYfKhRANCAAQO1SY4w8bnMFaMf0Yq3CMbbzalkjSq
AbzxRelgoCWeakDj5chsxLbwApVNFA5XVWOPzmnsmpkT5vSUa/km58Z5
-----END PRIVATE KEY-----
""", publicAllowed: false)!
private let rsaKey = PEMKey(pem: """
-----BEGIN PRIVATE KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQDJ7Jdnp/0ZmfED
E0AiDehj7rUrtBfIOkepYJFZ/l7RaGHNkiBg8Ds2ctFHDHVsC+GZPz5uOVKPrnmq
nehpf8CmFIVjj3LhTHJnpTTPsqk8MCI9Xz7HZ4Y3P54dtNpPsgrbnrVdRnrIQlyA
cSLrChlO4ZsgA5i/lsEAqE5zGiZL3/NRcue9AGzpE/grjzzqaMeGWiyYszMC8g6c
81tZVeVIXqrN9KLWg/3XkdroNxa3o7oWjqimAvk084qQo+1dtvmAso1Hz+cSPalk
7AROLzTB6Ei03e8h5LYGSMlYHM5G54SILOo1ITobawKrGD6LGh57fZ8FeUURRdaI
+agDcYw9AgMBAAECggEAQKDpFNQ/viH3cfSHYl7xMosEkahitENzDFNMMnGoB35R
T2ql0mERkqvNL+Bc9OgYnOQRJ1ZRhothhapk6N9q2b1XtDYFnvbI50OJU7DrWchO
LTZ+8XPBEY3bHcb02O0zbHevtNsKEW6sDLApbPEeiJDNBcIg8bFetMcp1M1Z1I6X
pV0wH5B2xcsK98Fu4+FM/6eqT9IaewXeiTYAmyKtEQQAenDyw4wGgxmKTtOIB8yu
mKNbzOd4lIuN0lxj65h2Z3PYtxpA5ul+wVoDYNpL/tdIEh2SWbREy/oWwy7ELRkB
l/dWUH1r+7q6ctcuji4GHFJaHd/4si/HJhVzyCFeQQKBgQDvfBefp7wcXvV78IDn
HIzS+sbAOjRHSHN1CXtW3eke2DaFt0i71r1niXg8WvpRstUgVvIuTItnQ/jldfJD
94ts2hdOclmf+QdhSWqfAqjkbU1lo0jWVyUFhTeoORCTF+qyr9swG5bVR1+ttSSo
tHzg/RJ8pYwp3IQ/f2/RWNd4hwKBgQDX2WX0Wf64iuDFOlGfWzugkS6KvXDuTVV5
9BKNWmJTYOmj1pryqRccd38xGRPf0+6MA7ykuFQovS6O3m0Lhdke6N+WknKqSCU5
VGrhvsNG2JFt/J6cUNGsNIjMBDprqULwGaA/Lc2cLGuGZNhs9hg1XIiKpYPGbqXx
YEe3c9z6GwKBgFE0FJaQO5qrIDYMUMkMxztqySW5FqztBikzM906laddzO7+PO1k
XQjUdi6Q8rvtFZNHqArG7aXwSF8V5TXipCYetTRmVbmGqVf1mu+b6US7QzkparMz
DVyX1U13PAWEYJKCSqI/WJ+s+eZeu7Vwrb9kUHZvc91l5nnZbkLgCv/VAoGANbse
UBde+x1HGpGL4/lX/H5ncY364LdLgdIqFBndxBep0WkIpUNGR4XPma8+bUdaaGw9
t1tTR9jgEBx6VJX7GGCr19WYyZ6v9Xd4K73K6oXaneB2sz7DEvT44KBk0owN56rZ
YyDJwAims4vC/Ey+dfoU2z6ccPb2RAHNmHM1HOUCgYAzOs4tEFPOCTzmQ4BwButd
sapf5gNoEOtGftpONO1LYTTPqHUDeaUtJiYnK8oxnrV5Z8zmn0i7KPNQGfstbdde
sZTTreJHXp6zFoOJdoGfpdmDY388UnFw6PcVjDPR+f9I2OcP7lS3RYAi8zXEV0QT
J49mSj2f1k3lelTwdV+CvA==
-----END PRIVATE KEY-----
""", publicAllowed: false)!

private let fuzzJWKs: [[String: String]] = {
    let point = ecKey.publicMembers!
    let rsa = rsaKey.publicMembers!
    return [
        ["kty": "EC", "crv": "P-256", "kid": "fuzz-ec", "use": "sig", "x": base64URL(point.first), "y": base64URL(point.second)],
        ["kty": "RSA", "kid": "fuzz-rsa", "n": base64URL(rsa.first), "e": base64URL(rsa.second)],
    ]
}()

private func jwksText(_ extra: [Any]) -> String {
    let document: [String: Any] = ["keys": extra + fuzzJWKs]
    return String(decoding: try! JSONSerialization.data(withJSONObject: document, options: [.sortedKeys]), as: UTF8.self)
}

private let vectorDirectory = "Tests/BrokerCoreTests/Resources/idtoken"

/// The vectors' key set plus the fuzz keys.
private let combinedJWKS: String = {
    let vectorKeys = mainPackageFile("\(vectorDirectory)/jwks.json")
        .flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
        .flatMap { $0["keys"] as? [Any] } ?? []
    return jwksText(vectorKeys)
}()

private func sign(header: [UInt8], payload: [UInt8], rsa: Bool, pss: Bool = false) -> String {
    let input = base64URL(header) + "." + base64URL(payload)
    let signature: [UInt8]
    if rsa {
        signature = try! rsaKey.sign(input, pss ? .ps256 : .rs256)
    } else {
        signature = try! ecKey.sign(input, .es256)
    }
    return input + "." + base64URL(signature)
}

private func verify(_ token: String, with verifier: IDTokenVerifier) async {
    do {
        let claims = try await verifier.verify(token, jwksURI: jwksURI, issuer: issuer, clientID: clientID, nonce: nonce)
        _ = claims.subject
    } catch {
        _ = String(describing: error)
    }
}

private let ecHeader = Array(#"{"alg":"ES256","kid":"fuzz-ec","typ":"JWT"}"#.utf8)
private let rsHeader = Array(#"{"alg":"RS256","kid":"fuzz-rsa","typ":"JWT"}"#.utf8)
private let psHeader = Array(#"{"alg":"PS256","kid":"fuzz-rsa"}"#.utf8)

private func tokenFor(_ bytes: [UInt8]) -> String? {
    guard let mode = bytes.first else { return nil }
    let rest = Array(bytes.dropFirst())
    switch mode % 4 {
    case 0:
        return String(decoding: rest, as: UTF8.self)
    case 1:
        return sign(header: ecHeader, payload: rest, rsa: false)
    case 2:
        let split = rest.firstIndex(of: 0) ?? rest.endIndex
        let payload = split < rest.endIndex ? Array(rest[(split + 1)...]) : []
        return sign(header: Array(rest[..<split]), payload: payload, rsa: mode & 4 != 0)
    default:
        let pss = mode & 4 != 0
        return sign(header: pss ? psHeader : rsHeader, payload: rest, rsa: true, pss: pss)
    }
}

private let sharedVerifier = IDTokenVerifier(jwks: JWKSCache(staticJWKS: combinedJWKS), clock: { now })

private func claims(_ extra: String = "") -> String {
    #"{"iss":"https://idp.example.test","sub":"user-1","aud":"broker-client","exp":1700003600,"iat":1700000000,"nonce":"n-0S6_WzA2Mj""# + extra + "}"
}

let idTokenTarget = FuzzTarget(name: "idtoken", run: { bytes in
    guard let token = tokenFor(bytes) else { return }
    runBlocking { await verify(token, with: sharedVerifier) }
}, seeds: {
    var seeds: [(String, [UInt8])] = []
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: mainPackageRoot.appendingPathComponent(vectorDirectory).path)) ?? []).sorted()
    for name in names where name.hasSuffix(".jwt") {
        if let token = mainPackageFile("\(vectorDirectory)/\(name)") {
            seeds.append(("idtoken-vector-" + name.dropLast(4), [0] + token.filter { $0 != UInt8(ascii: "\n") }))
        }
    }
    let payloads = [
        claims(),
        claims(#","azp":"broker-client","aud":["broker-client","other"],"name":"Ann","email":"a@example.test","email_verified":true"#),
        claims(#","nbf":1700000000,"auth_time":1700000000,"acr":"0","amr":["pwd"]"#),
        #"{"iss":"https://idp.example.test","sub":"user-1","aud":["other"],"exp":1.7e9,"iat":"1700000000"}"#,
        #"{"iss":"https://idp.example.test","aud":"broker-client","exp":1600000000}"#,
    ]
    for (index, payload) in payloads.enumerated() {
        seeds.append((String(format: "idtoken-es256-%02d", index), [1] + Array(payload.utf8)))
        seeds.append((String(format: "idtoken-rs256-%02d", index), [3] + Array(payload.utf8)))
    }
    seeds.append(("idtoken-ps256", [7] + Array(claims().utf8)))
    seeds.append(("idtoken-header-es256", [2] + ecHeader + [0] + Array(claims().utf8)))
    seeds.append(("idtoken-header-rs256", [6] + rsHeader + [0] + Array(claims().utf8)))
    seeds.append(("idtoken-header-crit", [2] + Array(#"{"alg":"ES256","kid":"fuzz-ec","crit":["exp"]}"#.utf8) + [0] + Array(claims().utf8)))
    seeds.append(("idtoken-header-nokid", [2] + Array(#"{"alg":"ES256"}"#.utf8) + [0] + Array(claims().utf8)))
    seeds.append(("idtoken-header-none", [2] + Array(#"{"alg":"none","kid":"fuzz-ec"}"#.utf8) + [0] + Array(claims().utf8)))
    return seeds
})

/// Valid tokens that the jwks target verifies against the fuzzer's key set.
private let jwksTokens: [String] = {
    var tokens = ["valid-rs256.jwt", "valid-es256.jwt", "valid-eddsa.jwt", "no-kid.jwt"].compactMap { name in
        mainPackageFile("\(vectorDirectory)/\(name)").map { String(decoding: $0.filter { $0 != UInt8(ascii: "\n") }, as: UTF8.self) }
    }
    tokens.append(sign(header: ecHeader, payload: Array(claims().utf8), rsa: false))
    return tokens
}()

let jwksTarget = FuzzTarget(name: "jwks", run: { bytes in
    let verifier = IDTokenVerifier(jwks: JWKSCache(staticJWKS: String(decoding: bytes, as: UTF8.self)), clock: { now })
    runBlocking {
        for token in jwksTokens { await verify(token, with: verifier) }
    }
}, seeds: {
    var seeds: [(String, [UInt8])] = []
    for name in ["jwks.json", "jwks-single.json", "jwks-rotated.json"] {
        if let bytes = mainPackageFile("\(vectorDirectory)/\(name)") { seeds.append(("jwks-vector-" + name.dropLast(5), bytes)) }
    }
    seeds.append(("jwks-fuzz-keys", Array(jwksText([]).utf8)))
    seeds.append(("jwks-oct-enc-ops", Array(jwksText([
        ["kty": "oct", "kid": "fuzz-ec", "k": "c2VjcmV0"],
        ["kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc", "x": "AA", "y": "AA"],
        ["kty": "RSA", "kid": "ops", "key_ops": ["encrypt"], "n": "AQAB", "e": "AQAB"],
        ["kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "alg": "EdDSA"],
        ["kty": "EC", "crv": "P-384", "kid": "p384", "alg": "ES256", "x": "AA", "y": "AA"],
    ]).utf8)))
    seeds.append(("jwks-empty", Array(#"{"keys":[]}"#.utf8)))
    seeds.append(("jwks-not-a-set", Array(#"{"keys":{"kty":"RSA"}}"#.utf8)))
    return seeds
})
