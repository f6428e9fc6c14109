import BrokerCore
import Foundation
import Testing

struct ConfigWebhooksTests {
    @Test func webhookWithSecret() throws {
        let config = try ConfigLoader.load(
            yaml: "webhooks:\n  url: https://hooks.example.com/broker\n  secret_env: HOOK_SECRET\n  failures_before_event: 5\n",
            fileName: "broker.yaml", environment: ["HOOK_SECRET": "s3cr3t-hook"]
        )
        let webhooks = try #require(config.webhooks)
        #expect(webhooks.url.absoluteString == "https://hooks.example.com/broker")
        #expect(webhooks.secret.reveal() == "s3cr3t-hook")
        #expect(webhooks.failuresBeforeEvent == 5)
        #expect(!String(describing: config).contains("s3cr3t-hook"))
    }

    @Test func webhookNeedsASecret() {
        #expect {
            try ConfigLoader.load(yaml: "webhooks:\n  url: https://hooks.example.com/broker\n", fileName: "broker.yaml", environment: [:])
        } throws: { error in
            "\(error)".contains("webhooks.secret_env") && "\(error)".contains("signing secret")
        }
    }

    @Test func webhookMustNotBePlainHTTPOffLoopback() {
        #expect(throws: ConfigError.self) {
            try ConfigLoader.load(yaml: "webhooks:\n  url: http://hooks.example.com/x\n  secret_env: S\n", fileName: "b.yaml", environment: ["S": "x"])
        }
    }

    /// A webhook written without its URL would send nothing, silently: a problem at its line.
    @Test func aWebhookWithoutItsURLIsAProblem() {
        for yaml in ["webhooks:\n  secret_env: HOOK_SECRET\n", "webhooks:\n  failures_before_event: 5\n"] {
            #expect {
                try ConfigLoader.load(yaml: yaml, fileName: "broker.yaml", environment: ["HOOK_SECRET": "s3cr3t-hook"])
            } throws: { error in
                "\(error)".contains("broker.yaml:2: webhooks.") && "\(error)".contains("no effect without webhooks.url")
            }
        }
        #expect(throws: Never.self) {
            try ConfigLoader.load(yaml: "webhooks:\n  secret_env: HOOK_SECRET\n", fileName: "broker.yaml",
                                  environment: ["HOOK_SECRET": "s3cr3t-hook", "BROKER_WEBHOOK_URL": "https://hooks.example.com/b"])
        }
    }

    @Test func noWebhooksByDefault() throws {
        #expect(try ConfigLoader.load(path: nil, environment: [:]).webhooks == nil)
    }
}

extension ConfigWebhooksTests {
    @Test func webhookSecretVariableNameIsChecked() {
        #expect {
            try ConfigLoader.load(yaml: "webhooks:\n  url: https://hooks.example.com/x\n  secret_env: 9-bad\n", fileName: "b.yaml", environment: [:])
        } throws: { error in
            "\(error)".contains("webhooks.secret_env") && "\(error)".contains("not a valid environment variable name")
        }
    }
}

struct DevelopmentModeSettingTests {
    @Test func developmentModeFromTheEnvironment() throws {
        #expect(try ConfigLoader.developmentMode(environment: [:]) == false)
        #expect(try ConfigLoader.developmentMode(environment: ["BROKER_DEV": ""]) == false)
        #expect(try ConfigLoader.developmentMode(environment: ["BROKER_DEV": "on"]) == true)
        #expect(try ConfigLoader.developmentMode(environment: ["BROKER_DEV": "false"]) == false)
        #expect(throws: ConfigError.self) { try ConfigLoader.developmentMode(environment: ["BROKER_DEV": "ture"]) }
    }
}
