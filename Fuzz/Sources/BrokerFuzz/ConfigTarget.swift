// The configuration: BrokerCore.ConfigLoader.load(yaml:fileName:environment:) — Yams, the
// document decoder, environment overrides, state keys, cross-checks.
//
// Input: YAML text; after the first NUL byte, optional environment lines `NAME=value`.
//
// Bounded on purpose: the configuration may name files to read (`client_secret_file`,
// `state.key_file`, TLS files). The configuration is trusted input, so reading /dev/zero or a
// FIFO because the file says so is not a bug, but it would hang or exhaust this process. Inputs
// that could name such a path are skipped: any of /dev, /proc, /sys, /run, and the YAML escapes
// that could spell them (\x \u \U \/ and a backslash before a line break). Relative paths resolve
// from the working directory (Fuzz/work when run by Fuzz/Makefile).
import BrokerCore

private let riskyPieces: [[UInt8]] = ["/dev", "/proc", "/sys", "/run", "\\x", "\\u", "\\U", "\\/", "\\\n", "\\\r"]
    .map { Array($0.utf8) }

private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= haystack.count else { return false }
    return haystack.withUnsafeBufferPointer { buffer in
        (0...(buffer.count - needle.count)).contains { start in
            buffer[start] == needle[0] && needle.indices.allSatisfy { buffer[start + $0] == needle[$0] }
        }
    }
}

let configTarget = FuzzTarget(name: "config", run: { bytes in
    if riskyPieces.contains(where: { contains(bytes, $0) }) { return }
    let split = bytes.firstIndex(of: 0) ?? bytes.endIndex
    let yaml = String(decoding: bytes[..<split], as: UTF8.self)
    var environment: [String: String] = [:]
    if split < bytes.endIndex {
        for line in bytes[(split + 1)...].split(separator: UInt8(ascii: "\n")) {
            let text = String(decoding: line, as: UTF8.self)
            guard let equals = text.firstIndex(of: "=") else { continue }
            environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
    }
    do {
        let config = try ConfigLoader.load(yaml: yaml, fileName: "fuzz.yaml", environment: environment)
        _ = String(describing: config)
    } catch {
        _ = String(describing: error)
    }
}, seeds: {
    var seeds: [(String, [UInt8])] = []
    if let example = mainPackageFile("config/example.yaml") { seeds.append(("config-example", example)) }
    let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
    seeds += textSeeds("config", [
        "",
        "server:\n  listen: 127.0.0.1:8080\n  public_url: http://127.0.0.1:8080\n",
        """
        providers:
          google:
            preset: google
            client_id: abc.apps.googleusercontent.com
            client_secret_env: GOOGLE_SECRET
        apps:
          demo:
            redirect_uris: [http://127.0.0.1:9000/callback]
            providers: [google]
        \u{0}GOOGLE_SECRET=s3cret
        BROKER_STATE_KEY=\(key)
        """,
        """
        providers:
          corp:
            issuer: https://idp.example.test
            client_id: broker
            client_secret_env: CORP_SECRET
            scopes: [openid, profile, email]
            token_endpoint_auth_method: client_secret_post
          plain:
            authorization_endpoint: https://auth.example.test/authorize
            token_endpoint: https://auth.example.test/token
            userinfo_endpoint: https://auth.example.test/userinfo
            client_id: x
            client_secret_env: PLAIN_SECRET
        apps:
          web: {redirect_uris: ["https://app.example.test/cb"], providers: [corp, plain], cors_origins: ["https://app.example.test"]}
        sessions: {idle_lifetime_seconds: 3600, absolute_lifetime_seconds: 86400}
        log: {level: debug, format: json}
        state: {directory: ./state, key_env: MY_KEY}
        \u{0}CORP_SECRET=a
        PLAIN_SECRET=b
        MY_KEY=\(key),\(key)
        BROKER_LISTEN=[::1]:0
        BROKER_LOG_LEVEL=trace
        """,
        "server: [1, 2\n",
        "a: &x {b: *x}\n",
        "? [complex, key]\n: value\n---\nsecond: doc\n",
        "server:\n  listen: 127.0.0.1:99999\n  threads: -1\n  max_body_bytes: 1e99\n\u{0}BROKER_THREADS=0x10\nBROKER_MAX_BODY_BYTES=",
    ])
    return seeds
})
