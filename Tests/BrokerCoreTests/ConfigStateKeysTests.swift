import BrokerCore
import Foundation
import Testing

/// Keys whose ids were computed independently: `head -c 8` of `sha256sum` of the raw bytes.
private enum Fixture {
    /// 32 zero bytes.
    static let zeros = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
    static let zerosID: UInt64 = 0x6668_7aad_f862_bd77
    /// The bytes 0, 1, ..., 31.
    static let counting = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
    static let countingID: UInt64 = 0x630d_cd29_66c4_3366
    /// 32 bytes of 0xFF.
    static let ones = "//////////////////////////////////////////8="
    static let onesID: UInt64 = 0xaf96_1376_0f72_635f
    /// 32 bytes of 7.
    static let sevens = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="
    static let sevensID: UInt64 = 0x4bb0_6f8e_4e3a_7715
    /// 16 bytes ("secret-key-value"): valid base64, wrong length.
    static let short = "c2VjcmV0LWtleS12YWx1ZQ=="
    /// 32 bytes whose last character has unused bits set.
    static let nonCanonical = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB="
    /// Not base64 at all.
    static let garbage = "not!base64$value%%%"
    /// The counting key in the URL alphabet.
    static let urlAlphabet = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8-_w=="
}

struct ConfigStateKeysTests {
    private func keys(env value: String) throws -> StateKeys? {
        try ConfigLoader.load(path: nil, environment: ["BROKER_STATE_KEY": value]).state.keys
    }

    private func everyRendering<T>(of subject: T) -> [String] {
        var dumped = ""
        dump(subject, to: &dumped)
        return [String(describing: subject), String(reflecting: subject), "\(subject)", dumped]
    }

    @Test func oneKeyFromTheDefaultVariable() throws {
        let config = try ConfigLoader.load(path: nil, environment: ["BROKER_STATE_KEY": Fixture.counting])
        let keys = try #require(config.state.keys)
        #expect(config.state.keySource == "env BROKER_STATE_KEY")
        #expect(keys.all.count == 1)
        #expect(keys.ids == [Fixture.countingID])
        #expect(keys.currentID == Fixture.countingID)
        #expect(StateKeys.id(of: keys.current) == Fixture.countingID)
        #expect(keys.key(id: Fixture.countingID) != nil)
        #expect(keys.key(id: Fixture.zerosID) == nil)
        // Surrounding whitespace and a trailing newline are separators, not part of the key.
        #expect(try self.keys(env: "  \(Fixture.counting)\n") == keys)
    }

    @Test func severalKeysInTheEnvironmentSeparatedByCommasAndSpaces() throws {
        for value in ["\(Fixture.zeros),\(Fixture.counting),\(Fixture.ones)",
                      "\(Fixture.zeros), \(Fixture.counting) ,\(Fixture.ones)",
                      "\(Fixture.zeros) \(Fixture.counting)\t\(Fixture.ones)",
                      ",\(Fixture.zeros),,\(Fixture.counting),\(Fixture.ones),"] {
            let keys = try #require(try self.keys(env: value), "\(value.count)")
            #expect(keys.ids == [Fixture.zerosID, Fixture.countingID, Fixture.onesID])
            #expect(keys.currentID == Fixture.zerosID)
            #expect(keys.all.count == 3)
        }
    }

    @Test func severalKeysInAFileSeparatedByNewlines() throws {
        for contents in ["\(Fixture.sevens)\n\(Fixture.zeros)\n", "\(Fixture.sevens)\r\n\(Fixture.zeros)\r\n",
                         "\n\n\(Fixture.sevens)\n\n\(Fixture.zeros)"] {
            let file = try TemporaryFile(contents: contents, name: "state-key-\(UUID().uuidString)")
            let config = try loadConfig("state:\n  key_file: \(file.path)\n")
            #expect(config.state.keySource == "file \(file.path)")
            let keys = try #require(config.state.keys)
            #expect(keys.ids == [Fixture.sevensID, Fixture.zerosID])
            #expect(keys.currentID == Fixture.sevensID)
        }
    }

    @Test func keyEnvNamesAnotherVariable() throws {
        let yaml = "state:\n  key_env: PROD_STATE_KEYS\n"
        let config = try loadConfig(yaml, env: ["PROD_STATE_KEYS": Fixture.ones, "BROKER_STATE_KEY": Fixture.garbage])
        #expect(config.state.keySource == "env PROD_STATE_KEYS")
        #expect(config.state.keys?.ids == [Fixture.onesID])
    }

    @Test func relativeKeyFileIsResolvedFromTheConfigDirectory() throws {
        let name = "state-key-\(UUID().uuidString)"
        let keyFile = try TemporaryFile(contents: Fixture.zeros + "\n", name: name)
        let configFile = try TemporaryFile(contents: "state:\n  key_file: \(name)\n", name: "config-\(UUID().uuidString).yaml")
        let config = try ConfigLoader.load(path: configFile.path, environment: [:])
        #expect(config.state.keySource == "file \(keyFile.path)")
        #expect(config.state.keys?.currentID == Fixture.zerosID)
    }

    @Test func unsetVariableOrMissingFileIsNotAProblem() throws {
        #expect(try ConfigLoader.load(path: nil, environment: [:]).state.keys == nil)
        #expect(try ConfigLoader.load(path: nil, environment: ["BROKER_STATE_KEY": ""]).state.keys == nil)
        let other = try loadConfig("state:\n  key_env: MISSING_STATE_KEY\n", env: ["BROKER_STATE_KEY": Fixture.zeros])
        #expect(other.state.keys == nil)
        #expect(other.state.keySource == "env MISSING_STATE_KEY")
        let missing = "/nonexistent/\(UUID().uuidString)/state-key"
        let config = try loadConfig("state:\n  key_file: \(missing)\n")
        #expect(config.state.keys == nil)
        #expect(config.state.keySource == "file \(missing)")
    }

    @Test func badBase64IsAProblemNamingTheVariableAndPosition() {
        let found = problems(of: "", env: ["BROKER_STATE_KEY": Fixture.garbage])
        #expect(found.count == 1)
        expectProblem(found, key: "BROKER_STATE_KEY",
                      contains: "environment variable BROKER_STATE_KEY: the key is not standard base64 with = padding")
        #expect(found.first?.line == nil && found.first?.file == nil)

        let url = problems(of: "", env: ["BROKER_STATE_KEY": Fixture.urlAlphabet])
        expectProblem(url, key: "BROKER_STATE_KEY", contains: "it has - or _ of the URL alphabet; use + and /")
        let unpadded = problems(of: "", env: ["BROKER_STATE_KEY": String(Fixture.counting.dropLast())])
        expectProblem(unpadded, key: "BROKER_STATE_KEY", contains: "the key is not standard base64 with = padding")
        let nonCanonical = problems(of: "", env: ["BROKER_STATE_KEY": Fixture.nonCanonical])
        expectProblem(nonCanonical, key: "BROKER_STATE_KEY", contains: "the key is not canonical base64")
    }

    @Test func wrongLengthAtPositionTwo() throws {
        let found = problems(of: "", env: ["BROKER_STATE_KEY": "\(Fixture.zeros),\(Fixture.short),\(Fixture.ones)"])
        #expect(found.count == 1)
        expectProblem(found, key: "BROKER_STATE_KEY",
                      contains: "environment variable BROKER_STATE_KEY: key 2 of 3 decodes to 16 bytes, not 32")

        let file = try TemporaryFile(contents: "\(Fixture.zeros)\n\(Fixture.short)\n", name: "state-key-\(UUID().uuidString)")
        let inFile = problems(of: "log:\n  level: info\nstate:\n  key_file: \(file.path)\n")
        expectProblem(inFile, key: "state.key_file",
                      contains: "state key file \(file.path): key 2 of 2 decodes to 16 bytes, not 32", line: 4)
        #expect(inFile.first?.file == "test.yaml")
    }

    @Test func everyBadKeyIsReportedInOneProblem() {
        let value = [Fixture.garbage, Fixture.zeros, Fixture.short, Fixture.zeros].joined(separator: "\n")
        let found = problems(of: "state:\n  key_env: STATE_KEYS\n", env: ["STATE_KEYS": value])
        #expect(found.count == 1)
        let problem = found.first
        #expect(problem?.key == "state.key_env")
        #expect(problem?.line == 2)
        #expect(problem?.message == "environment variable STATE_KEYS: key 1 of 4 is not standard base64 with = padding "
            + "of 32 bytes, as openssl rand -base64 32 prints; key 3 of 4 decodes to 16 bytes, not 32; "
            + "openssl rand -base64 32 prints a key of the right size; key 4 of 4 repeats key 2")
    }

    @Test func duplicateKeyIsAProblem() {
        let found = problems(of: "", env: ["BROKER_STATE_KEY": "\(Fixture.zeros),\(Fixture.ones),\(Fixture.zeros)"])
        expectProblem(found, key: "BROKER_STATE_KEY", contains: "key 3 of 3 repeats key 1")
        #expect(found.count == 1)
    }

    @Test func emptyFileOrBlankValueHoldsNoKey() throws {
        let file = try TemporaryFile(contents: "\n\n", name: "state-key-\(UUID().uuidString)")
        expectProblem(problems(of: "state:\n  key_file: \(file.path)\n"), key: "state.key_file",
                      contains: "state key file \(file.path): holds no key", line: 2)
        expectProblem(problems(of: "", env: ["BROKER_STATE_KEY": " , "]), key: "BROKER_STATE_KEY",
                      contains: "environment variable BROKER_STATE_KEY: holds no key")
    }

    @Test func unreadableKeyFileIsAProblem() throws {
        let directory = FileManager.default.temporaryDirectory.path
        expectProblem(problems(of: "state:\n  key_file: \(directory)\n"), key: "state.key_file",
                      contains: "cannot read state key file \(directory): it is not a readable file", line: 2)
        let binary = FileManager.default.temporaryDirectory.appendingPathComponent("state-key-\(UUID().uuidString)")
        try Data([0xFF, 0xFE, 0x00, 0x80]).write(to: binary)
        defer { try? FileManager.default.removeItem(at: binary) }
        expectProblem(problems(of: "state:\n  key_file: \(binary.path)\n"), key: "state.key_file",
                      contains: "state key file \(binary.path) is not UTF-8 text", line: 2)
    }

    @Test func keyIDsAreStableDistinctAndFollowTheOrder() throws {
        let forward = try #require(try keys(env: "\(Fixture.zeros),\(Fixture.counting),\(Fixture.ones),\(Fixture.sevens)"))
        let again = try #require(try keys(env: "\(Fixture.zeros),\(Fixture.counting),\(Fixture.ones),\(Fixture.sevens)"))
        #expect(forward.ids == again.ids)
        #expect(forward == again)
        #expect(Set(forward.ids).count == 4)
        #expect(forward.ids == [Fixture.zerosID, Fixture.countingID, Fixture.onesID, Fixture.sevensID])
        for (key, id) in zip(forward.all, forward.ids) {
            #expect(StateKeys.id(of: key) == id)
        }

        // The first key is the current one; the order of the others is kept.
        let reversed = try #require(try keys(env: "\(Fixture.sevens),\(Fixture.ones),\(Fixture.counting),\(Fixture.zeros)"))
        #expect(reversed.currentID == Fixture.sevensID)
        #expect(reversed.ids == forward.ids.reversed())
        #expect(reversed != forward)

        // key(id:) answers the key with that id: a set built from it has it as current.
        for id in forward.ids {
            let key = try #require(forward.key(id: id))
            #expect(StateKeys(current: key).currentID == id)
        }
        #expect(StateKeys.hex(id: Fixture.zerosID) == "66687aadf862bd77")
        #expect(StateKeys.hex(id: 1) == "0000000000000001")
    }

    @Test func keySetBuiltInCodeDropsRepeatedOlderKeys() throws {
        let keys = try #require(try keys(env: "\(Fixture.zeros),\(Fixture.ones)"))
        let current = try #require(keys.key(id: Fixture.onesID))
        let older = try #require(keys.key(id: Fixture.zerosID))
        let built = StateKeys(current: current, older: [older, current, older])
        #expect(built.ids == [Fixture.onesID, Fixture.zerosID])
        #expect(built.currentID == Fixture.onesID)
        #expect(built.all.count == 2)
    }

    @Test func noKeyInAnyDescription() throws {
        let keyFile = try TemporaryFile(contents: "\(Fixture.counting)\n\(Fixture.sevens)\n",
                                        name: "state-key-\(UUID().uuidString)")
        let yaml = "state:\n  key_file: \(keyFile.path)\n"
        let config = try loadConfig(yaml)
        let keys = try #require(config.state.keys)
        var renderings = everyRendering(of: config) + everyRendering(of: config.state) + everyRendering(of: keys)
            + everyRendering(of: keys.current) + everyRendering(of: keys.all)
        #expect(String(describing: keys) == "StateKeys(<redacted>, 2 keys, current id 630dcd2966c43366)")
        #expect(renderings.contains { $0.contains("StateKeys(<redacted>, 2 keys") })

        // Every failure, in the file and from the environment, with real keys next to the bad ones.
        let secrets = [Fixture.counting, Fixture.sevens, Fixture.short, Fixture.garbage, Fixture.nonCanonical,
                       Fixture.urlAlphabet]
        let badFile = try TemporaryFile(contents: "\(Fixture.counting)\n\(Fixture.short)\n\(Fixture.counting)\n",
                                        name: "state-key-\(UUID().uuidString)")
        let attempts: [(yaml: String, env: [String: String])] = [
            ("state:\n  key_file: \(badFile.path)\n", [:]),
            ("", ["BROKER_STATE_KEY": "\(Fixture.sevens),\(Fixture.garbage),\(Fixture.nonCanonical)"]),
            ("state:\n  key_env: K\n", ["K": "\(Fixture.urlAlphabet) \(Fixture.sevens) \(Fixture.sevens)"]),
        ]
        for attempt in attempts {
            do {
                _ = try loadConfig(attempt.yaml, env: attempt.env)
                Issue.record("expected a ConfigError")
            } catch {
                renderings += everyRendering(of: error) + error.problems.flatMap { everyRendering(of: $0) }
            }
        }
        for text in renderings {
            for secret in secrets {
                // Not the key, nor a recognisable piece of it.
                #expect(!text.contains(secret.prefix(12)), "\(text)")
            }
        }
    }

    @Test func exampleConfigDocumentsTheDefaultsAndReadsTheKeys() throws {
        var environment = try ExampleConfig.secretEnvironment(value: "x")
        environment["BROKER_STATE_KEY"] = "\(Fixture.ones)\n\(Fixture.zeros)"
        let config = try ConfigLoader.load(path: ExampleConfig.path, environment: environment)
        #expect(config.sessions == SessionSettings())
        #expect(config.state.directory == StateSettings().directory)
        #expect(config.state.snapshotIntervalSeconds == StateSettings().snapshotIntervalSeconds)
        #expect(config.state.journalMaxBytes == StateSettings().journalMaxBytes)
        #expect(config.state.keySource == "env BROKER_STATE_KEY")
        #expect(config.state.keys?.ids == [Fixture.onesID, Fixture.zerosID])
    }
}
