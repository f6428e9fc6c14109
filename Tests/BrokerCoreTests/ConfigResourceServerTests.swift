import BrokerCore
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
        #expect(config.resourceServers.first?.secret.reveal() == secret && !"\(config)".contains(secret))
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
