import BrokerCore
import Foundation
import Testing
import WireValues

/// `admin`: off by default; its own listener, or the public one only behind a token from a file.
struct ConfigAdminTests {
    private let token = String(repeating: "t0k3n-", count: 8)

    private func tokenFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("admin-\(UUID().uuidString)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func load(_ yaml: String, _ environment: [String: String] = [:]) throws(ConfigError) -> BrokerConfig {
        try ConfigLoader.load(yaml: yaml, fileName: "broker.yaml", environment: environment)
    }

    @Test func offByDefault() throws {
        #expect(try load("").admin == nil)
    }

    @Test func aTokenFileAloneServesThePublicListenerBehindIt() throws {
        let config = try load("admin:\n  token_file: \(try tokenFile(token + "\n"))\n")
        let admin = try #require(config.admin)
        #expect(admin.listen == nil)
        #expect(admin.token?.reveal() == token, "one trailing newline dropped")
        #expect(!String(describing: config).contains(token))
    }

    @Test func aListenerOfItsOwnOnLoopbackNeedsNoToken() throws {
        let admin = try #require(try load("admin:\n  listen: 127.0.0.1:9091\n").admin)
        #expect(admin.listen?.description == "127.0.0.1:9091" && admin.token == nil)
        let fromEnvironment = try #require(try load("", ["BROKER_ADMIN_LISTEN": "[::1]:9091", "BROKER_ADMIN_TOKEN_FILE": try tokenFile(token)]).admin)
        #expect(fromEnvironment.listen?.port == 9091 && fromEnvironment.token?.reveal() == token)
    }

    @Test func aListenerOffLoopbackWithoutATokenIsRefused() throws {
        #expect { try load("admin:\n  listen: 0.0.0.0:9091\n") } throws: { error in
            "\(error)".contains("broker.yaml:2: admin.listen") && "\(error)".contains("needs admin.token_file")
        }
        #expect(try load("admin:\n  listen: 0.0.0.0:9091\n  token_file: \(try tokenFile(token))\n").admin?.token != nil)
    }

    /// `/metrics` can be kept off the public listener, never off both.
    @Test func metricsOnlyOnTheAdminListenerNeedsOne() throws {
        #expect(try load("admin:\n  listen: 127.0.0.1:9091\n  metrics_only: true\n").admin?.metricsOnly == true)
        #expect(try load("admin:\n  listen: 127.0.0.1:9091\n").admin?.metricsOnly == false)
        #expect { try load("admin:\n  token_file: \(try tokenFile(token))\n  metrics_only: true\n") } throws: { error in
            "\(error)".contains("broker.yaml:3: admin.metrics_only") && "\(error)".contains("needs admin.listen")
        }
    }

    /// The admin listener's trusted proxies apply to it alone: without one, nowhere.
    @Test func adminTrustedProxiesNeedTheAdminListener() throws {
        #expect { try load("admin:\n  token_file: \(try tokenFile(token))\n  trusted_proxies: 10.0.0.0/8\n") } throws: { error in
            "\(error)".contains("broker.yaml:3: admin.trusted_proxies") && "\(error)".contains("needs admin.listen")
        }
        #expect(try load("admin:\n  listen: 127.0.0.1:9091\n  trusted_proxies: 10.0.0.0/8\n").admin?.trustedProxies.isEmpty == false)
    }

    /// Such a listener answers only a `Host` of 127.0.0.1, ::1 or localhost: bound elsewhere on
    /// loopback, it would refuse everything, so it is refused at start.
    @Test func aTokenlessListenerOnAnotherLoopbackAddressIsRefused() throws {
        #expect { try load("admin:\n  listen: 127.0.0.2:9091\n") } throws: { error in
            "\(error)".contains("admin.listen") && "\(error)".contains("must be 127.0.0.1, ::1 or localhost")
        }
        #expect(try load("admin:\n  listen: localhost:9091\n").admin?.listen?.host == "localhost")
        #expect(try load("admin:\n  listen: 127.0.0.2:9091\n  token_file: \(try tokenFile(token))\n").admin?.token != nil)
    }

    /// The admin listener's proxies are its own: none by default, whatever the public
    /// listener's are.
    @Test func theAdminListenerTrustsOnlyItsOwnProxies() throws {
        let admin = try #require(try load("server:\n  trusted_proxies: 127.0.0.1\nadmin:\n  listen: 127.0.0.1:9091\n").admin)
        #expect(admin.trustedProxies.isEmpty)
        let proxied = try #require(try load("admin:\n  listen: 127.0.0.1:9091\n", ["BROKER_ADMIN_TRUSTED_PROXIES": "10.0.0.5"]).admin)
        #expect(proxied.trustedProxies.map(\.description) == ["10.0.0.5/32"])
    }

    @Test func thePublicListenerAsAdminListenerIsRefused() throws {
        for yaml in ["server:\n  listen: 127.0.0.1:8080\nadmin:\n  listen: 127.0.0.1:8080\n",
                     "server:\n  listen: 0.0.0.0:8080\nadmin:\n  listen: 127.0.0.1:8080\n  token_file: \(try tokenFile(token))\n"] {
            #expect { try load(yaml) } throws: { error in
                "\(error)".contains("admin.listen") && "\(error)".contains("must not be the public listener")
            }
        }
    }

    /// `serve --listen` sets the public listener over the file and the environment, and is
    /// checked with them: the admin listener's port is refused there too, and a bad value
    /// names the flag.
    @Test func theListenFlagIsCheckedWithTheRest() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("broker-\(UUID().uuidString).yaml").path
        try "admin:\n  listen: 127.0.0.1:18086\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect { try ConfigLoader.load(path: path, environment: [:], listen: "127.0.0.1:18086") } throws: { error in
            "\(error)".contains("admin.listen") && "\(error)".contains("must not be the public listener")
        }
        #expect { try ConfigLoader.load(path: path, environment: [:], listen: "nowhere") } throws: { error in "\(error)".contains("--listen") }
        let flagged = try ConfigLoader.load(path: path, environment: ["BROKER_LISTEN": "127.0.0.1:18087"], listen: "127.0.0.1:18088")
        #expect(flagged.server.listen.port == 18088)
    }

    @Test func aShortEmptyOrMissingTokenFileIsRefusedWithoutItsText() throws {
        #expect { try load("admin:\n  token_file: \(try tokenFile("short-secret\n"))\n") } throws: { error in
            "\(error)".contains("admin.token_file") && "\(error)".contains("at least 32") && !"\(error)".contains("short-secret")
        }
        #expect { try load("admin:\n  token_file: \(try tokenFile("\n"))\n") } throws: { error in "\(error)".contains("is empty") }
        #expect { try load("admin:\n  token_file: /nonexistent/admin-token\n") } throws: { error in
            "\(error)".contains("admin.token_file") && "\(error)".contains("does not exist")
        }
        #expect { try load("admin:\n  token: inline\n") } throws: { error in "\(error)".contains("unknown key") }
    }
}
