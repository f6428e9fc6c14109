import BrokerCore
import Foundation
import Testing

/// `resource_servers`: each backend that may introspect, with a secret long enough and a limit.
struct ConfigResourceServerTests {
    private let secret = String(repeating: "s3cr3t-", count: 6)

    @Test func noneByDefault() throws {
        #expect(try loadConfig("").resourceServers.isEmpty)
    }

    @Test func aResourceServerHasASecretAndALimit() throws {
        let config = try loadConfig("resource_servers:\n  orders:\n    secret_env: ORDERS\n    requests_per_minute: 60\n  billing:\n    secret_env: BILLING\n",
                                    env: ["ORDERS": secret, "BILLING": secret])
        #expect(config.resourceServers.map(\.id) == ["billing", "orders"])
        #expect(config.resourceServers.map(\.requestsPerMinute) == [6000, 60])
        guard case .secret(let first)? = config.resourceServers.first?.credential else {
            Issue.record("billing authenticates with its secret")
            return
        }
        #expect(first.reveal() == secret && !"\(config)".contains(secret))
    }

    /// RFC 7517 Appendix A.1's EC public key.
    private static let publicKey = #"{"kty":"EC","crv":"P-256","x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM""#

    private func keySetFile(_ keys: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json").path
        try Data(#"{"keys":[\#(keys)]}"#.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aResourceServerMaySignAssertionsWithTheKeysOfItsKeySet() throws {
        let path = try keySetFile(Self.publicKey + #","alg":"ES256","kid":"orders-1"}"#)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let config = try loadConfig("resource_servers:\n  orders:\n    jwks_file: \(path)\n")
        guard case .keys(let keys, let file)? = config.resourceServers.first?.credential else {
            Issue.record("orders authenticates with its keys")
            return
        }
        #expect(keys.map(\.keyID) == ["orders-1"] && file == path)
    }

    @Test func aKeySetWithoutAlgOrKidOrWithAPrivateKeyIsRefused() throws {
        for (keys, complaint) in [
            (Self.publicKey + "}", "needs an alg"),
            (Self.publicKey + #","alg":"ES256","d":"870MB6gfuTJ4HtUnUvYMyJpr5eUZNP4Bk43bVdj3eAE"}"#, "private member d"),
            (Self.publicKey + #","alg":"RS256"}"#, "not a public key of the type RS256 needs"),
            (Self.publicKey + #","alg":"ES256"},"# + Self.publicKey + #","alg":"ES256"}"#, "needs a kid of its own"),
        ] {
            let path = try keySetFile(keys)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let found = problems(of: "resource_servers:\n  orders:\n    jwks_file: \(path)\n")
            #expect(found.map(\.key) == ["resource_servers.orders.jwks_file"] && found.contains { $0.message.contains(complaint) }, "\(found)")
        }
        #expect(problems(of: "resource_servers:\n  orders:\n    jwks_file: /nonexistent/jwks.json\n").contains {
            $0.message.contains("/nonexistent/jwks.json")
        })
        #expect(problems(of: "resource_servers:\n  orders:\n    secret_env: ORDERS\n    jwks_file: /x.json\n", env: ["ORDERS": secret])
            .map(\.key) == ["resource_servers.orders.jwks_file"])
    }

    @Test func aMissingShortOrUnsetSecretAndABadLimitAreRefused() {
        #expect(problems(of: "resource_servers:\n  orders: {}\n").map(\.key) == ["resource_servers.orders.secret_env"])
        #expect(problems(of: "resource_servers:\n  orders:\n    secret_env: ORDERS\n", env: ["ORDERS": "short"]).map(\.message)
            .contains { $0.contains("at least 32 characters") })
        #expect(problems(of: "resource_servers:\n  orders:\n    secret_env: ORDERS\n").map(\.message)
            .contains { $0.contains("ORDERS is not set") })
        #expect(problems(of: "resource_servers:\n  orders:\n    secret_env: ORDERS\n    requests_per_minute: 0\n", env: ["ORDERS": secret])
            .map(\.key) == ["resource_servers.orders.requests_per_minute"])
        #expect(problems(of: "resource_servers:\n  orders:\n    secret_env: ORDERS\n    tokens: 1\n", env: ["ORDERS": secret])
            .map(\.key) == ["resource_servers.orders.tokens"])
    }
}
