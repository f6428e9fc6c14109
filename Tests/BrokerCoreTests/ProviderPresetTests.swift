import BrokerCore
import Foundation
import HTTPServer
import Testing
import WireValues

struct ProviderPresetTests {
    /// The normalised profile each preset must give for its recorded response in
    /// `Resources/profiles/<preset>.json` (sources in `Resources/profiles/SOURCES.md`).
    static let expectedProfiles: [String: NormalisedProfile] = [
        "google": NormalisedProfile(subject: "10769150350006150715113082367", email: "jsmith@example.com",
                                    emailVerified: true),
        "github": NormalisedProfile(subject: "1", name: "monalisa octocat", email: "octocat@github.com",
                                    emailVerified: true, picture: "https://github.com/images/error/octocat_happy.gif"),
        "microsoft": NormalisedProfile(subject: "OLu859SGc2Sr9ZsqbkG-QbeLgJlb41KcdiPoLYNpSFA", name: "Mikah Ollenburg",
                                       email: "mikoll@contoso.com", emailVerified: nil,
                                       picture: "https://graph.microsoft.com/v1.0/me/photo/$value"),
        "gitlab": NormalisedProfile(subject: "1", name: "Administrator", email: "admin@example.com", emailVerified: true,
                                    picture: "https://www.gravatar.com/avatar/e64c7d89f26bd1972efa854d13d7dd61?s=80&d=identicon"),
        "slack": NormalisedProfile(subject: "U0R7JM", name: "krane", email: "krane@slack-corp.com", emailVerified: true,
                                   picture: "https://secure.gravatar.com/....png"),
        "spotify": NormalisedProfile(subject: "wizzler", name: "JM Wizzler", email: "email@example.com",
                                     emailVerified: false,
                                     picture: "https://i.scdn.co/image/ab6775700000ee8555c25988a6ac314394d3fbf5"),
        "dropbox": NormalisedProfile(subject: "dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc",
                                     name: "Franz Ferdinand (Personal)", email: "franz@dropbox.com", emailVerified: true),
        "discord": NormalisedProfile(subject: "80351110224678912", name: "Nelly", email: "nelly@discord.com",
                                     emailVerified: true, picture: "https://cdn.discordapp.com/avatars/"
                                         + "80351110224678912/8342729096ea3675442027381ff50dfe.png"),
        "linkedin": NormalisedProfile(subject: "782bbtaQ", name: "John Doe", email: "doe@email.com", emailVerified: true,
                                      picture: "https://media.licdn-ei.com/dms/image/C5F03AQHqK8v7tB1HCQ/"
                                          + "profile-displayphoto-shrink_100_100/0/"),
        "twitch": NormalisedProfile(subject: "713936733", name: "scotwht", email: "scotwht@justin.tv", emailVerified: true,
                                    picture: "https://static-cdn.jtvnw.net/user-default-pictures-uv/"
                                        + "998f01ae-def8-11e9-b95c-784f43822e80-profile_image-150x150.png"),
        "salesforce": NormalisedProfile(subject: "https://login.salesforce.com/id/00Dx0000000BV7zEAG/005x0000001S2b9AAC",
                                        name: "Ada Admin", email: "admin@acme.example.com", emailVerified: true,
                                        picture: "https://acme.file.force.com/profilephoto/005/F"),
        "zoom": NormalisedProfile(subject: "z8yAAAAA8bbbQ", name: "Taylor Kim", email: "example@example.com",
                                  emailVerified: nil, picture: "https://example.com/photo.jpg"),
        "okta": NormalisedProfile(subject: "00uid4BxXw6I6TV4m0g3", name: "John Doe", email: "john.doe@example.com",
                                  emailVerified: true),
        "auth0": NormalisedProfile(subject: "248289761001", name: "Jane Josephine Doe", email: "janedoe@exampleco.com",
                                   emailVerified: true, picture: "http://exampleco.com/janedoe/me.jpg"),
        "keycloak": NormalisedProfile(subject: "f1b3c6e2-3c1a-4d2e-9f4b-6a7d8e9f0a1b", name: "Alice Liddell",
                                      email: "alice@keycloak.example.com", emailVerified: false),
        "oidc": NormalisedProfile(subject: "248289761001", name: "Jane Doe", email: "janedoe@example.com",
                                  picture: "http://example.com/janedoe/me.jpg"),
    ]

    /// The recorded response for `preset`.
    static func recordedProfile(_ preset: String) throws -> JSONValue {
        let url = try #require(Bundle.module.url(forResource: preset, withExtension: "json",
                                                 subdirectory: "Resources/profiles"), "no recorded profile for \(preset)")
        return try JSONValue.parse(Array(try Data(contentsOf: url)))
    }

    @Test(arguments: ProviderPreset.names)
    func recordedProfileMapsExactly(_ name: String) throws {
        let preset = try #require(ProviderPreset.named(name))
        let expected = try #require(Self.expectedProfiles[name], "no expected profile for \(name)")
        #expect(preset.profileMapping.profile(from: try Self.recordedProfile(name)) == expected)
    }

    @Test func everyPresetHasARecordedProfile() {
        #expect(Set(Self.expectedProfiles.keys) == Set(ProviderPreset.names))
    }

    @Test func namesAreUniqueAndFound() {
        #expect(Set(ProviderPreset.names).count == ProviderPreset.all.count)
        #expect(ProviderPreset.names == ProviderPreset.names.sorted())
        for name in ["google", "github", "microsoft", "gitlab", "slack", "spotify", "dropbox", "discord", "linkedin",
                     "twitch", "salesforce", "zoom", "okta", "auth0", "keycloak", "oidc"] {
            #expect(ProviderPreset.named(name)?.name == name)
        }
        #expect(ProviderPreset.named("Google") == nil)
        #expect(ProviderPreset.named("facebook") == nil)
    }

    /// Every template with its placeholders filled (defaults, or a sample for required ones).
    private func filledTemplates(_ preset: ProviderPreset) -> [String: String?] {
        var values: [String: String] = [:]
        for placeholder in preset.placeholders {
            values[placeholder.name] = placeholder.defaultValue ?? "sample"
        }
        var filled = preset.endpoints.templates.mapValues { PresetPlaceholder.fill($0, with: values) }
        if case .configuredIssuer(let example) = preset.endpoints {
            filled["issuer (example)"] = example
        }
        filled["documentation"] = preset.documentation
        return filled
    }

    @Test(arguments: ProviderPreset.names)
    func everyEndpointIsHTTPS(_ name: String) throws {
        let preset = try #require(ProviderPreset.named(name))
        let filled = filledTemplates(preset)
        #expect(!filled.isEmpty)
        for (key, text) in filled {
            let url = try #require(text.flatMap { URL(string: $0) }, "\(name) \(key): \(String(describing: text))")
            #expect(url.scheme == "https" && url.host?.isEmpty == false, "\(name) \(key): \(url)")
            #expect(key == "documentation" || (url.query == nil && url.fragment == nil), "\(name) \(key): \(url)")
        }
    }

    @Test(arguments: ProviderPreset.names)
    func placeholdersAreDeclaredAndScopesValid(_ name: String) throws {
        let preset = try #require(ProviderPreset.named(name))
        for template in preset.endpoints.templates.values {
            // Fill with nothing: a template that needs a value fails, so list what it needs.
            let needed = preset.placeholders.filter { template.contains("{\($0.name)}") }.map(\.name)
            #expect((PresetPlaceholder.fill(template, with: [:]) != nil) == needed.isEmpty, "\(name): \(template)")
            let values = Dictionary(uniqueKeysWithValues: needed.map { ($0, "x") })
            #expect(PresetPlaceholder.fill(template, with: values) != nil, "\(name): undeclared placeholder in \(template)")
        }
        #expect(!preset.defaultScopes.contains { $0.isEmpty || $0.contains(" ") || $0.contains(",") })
        #expect(["GET", "POST"].contains(preset.userinfoMethod))
        #expect([" ", ","].contains(preset.scopeSeparator))
    }

    @Test func googleAsksForOfflineAccessEveryTime() {
        let google = ProviderPreset.google
        #expect(google.endpoints == .discovery(issuer: "https://accounts.google.com"))
        #expect(google.authorizationParameters == [
            "access_type": "offline", "prompt": "consent", "include_granted_scopes": "true",
        ])
        #expect(google.defaultScopes == ["openid", "email", "profile"])
        #expect(google.profileMapping == .openIDConnect)
    }

    @Test func microsoftFillsItsTenant() throws {
        let microsoft = ProviderPreset.microsoft
        let tenant = try #require(microsoft.placeholder(named: "tenant"))
        #expect(tenant.defaultValue == "common")
        let templates = microsoft.endpoints.templates
        let token = try #require(templates["token_endpoint"])
        #expect(PresetPlaceholder.fill(token, with: ["tenant": "common"])
            == "https://login.microsoftonline.com/common/oauth2/v2.0/token")
        #expect(PresetPlaceholder.fill(token, with: ["tenant": "contoso.onmicrosoft.com"])
            == "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token")
        #expect(PresetPlaceholder.fill(token, with: [:]) == nil)
        #expect(templates["userinfo_endpoint"] == "https://graph.microsoft.com/oidc/userinfo")
        #expect(templates["revocation_endpoint"] == nil)
        for valid in ["common", "organizations", "8eaef023-2b34-4da1-9baa-8bc8c9d6a490", "contoso.onmicrosoft.com"] {
            #expect(PresetPlaceholder.isValidValue(valid), "\(valid)")
        }
        for invalid in ["", "a/b", "..", "x?y", "tenant id", "évian", String(repeating: "a", count: 129)] {
            #expect(!PresetPlaceholder.isValidValue(invalid), "\(invalid)")
        }
    }

    @Test func providerSpecificCalls() {
        #expect(ProviderPreset.dropbox.userinfoMethod == "POST")
        #expect(ProviderPreset.dropbox.authorizationParameters == ["token_access_type": "offline"])
        #expect(ProviderPreset.github.scopeSeparator == ",")
        #expect(ProviderPreset.all.filter { $0.userinfoMethod != "GET" }.map(\.name) == ["dropbox"])
        #expect(ProviderPreset.twitch.tokenEndpointAuthMethod == .clientSecretPost)
        for name in ["okta", "auth0", "keycloak", "oidc"] {
            guard case .configuredIssuer? = ProviderPreset.named(name)?.endpoints else {
                Issue.record("\(name) must require the issuer")
                continue
            }
            #expect(ProviderPreset.named(name)?.profileMapping == .openIDConnect)
            #expect(ProviderPreset.named(name)?.defaultScopes == ["openid", "email", "profile"])
        }
    }
}
