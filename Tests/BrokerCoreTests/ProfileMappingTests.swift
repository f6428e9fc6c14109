import BrokerCore
import HTTPServer
import Testing
import WireValues

struct ProfileMappingTests {
    private func json(_ text: String) throws -> JSONValue {
        try JSONValue.parse(Array(text.utf8))
    }

    @Test func openIDConnectReadsTheStandardClaims() throws {
        let raw = try json(#"{"sub":"248289761001","name":"Jane Doe","email":"janedoe@example.com","#
            + #""email_verified":true,"picture":"https://example.com/janedoe/me.jpg"}"#)
        #expect(ProfileMapping.openIDConnect.profile(from: raw) == NormalisedProfile(
            subject: "248289761001", name: "Jane Doe", email: "janedoe@example.com", emailVerified: true,
            picture: "https://example.com/janedoe/me.jpg"))
    }

    @Test func nameFallsBackToPreferredUsername() throws {
        let raw = try json(#"{"sub":"u1","name":null,"preferred_username":"j.doe"}"#)
        #expect(ProfileMapping.openIDConnect.profile(from: raw)?.name == "j.doe")
        let empty = try json(#"{"sub":"u1","name":"","preferred_username":"j.doe"}"#)
        #expect(ProfileMapping.openIDConnect.profile(from: empty)?.name == "j.doe", "an empty string counts as absent")
    }

    @Test func emailVerifiedAcceptsBooleansAndTheirStrings() throws {
        let cases: [(String, Bool?)] = [
            ("true", true), ("false", false), (#""true""#, true), (#""false""#, false), (#""TRUE""#, true),
            (#""yes""#, nil), ("1", true), ("0", false), ("null", nil), ("{}", nil),
        ]
        for (value, expected) in cases {
            let raw = try json(#"{"sub":"u1","email":"a@example.com","email_verified":"# + value + "}")
            #expect(ProfileMapping.openIDConnect.profile(from: raw)?.emailVerified == expected, "\(value)")
        }
    }

    @Test func emailVerifiedIsUnknownWithoutAnEmail() throws {
        let raw = try json(#"{"sub":"u1","email_verified":true}"#)
        #expect(ProfileMapping.openIDConnect.profile(from: raw)?.emailVerified == nil)
        let constant = ProfileMapping(subject: ["id"], email: ["email"], emailVerified: [.constant(.bool(true))])
        #expect(constant.profile(from: try json(#"{"id":1}"#))?.emailVerified == nil)
        #expect(constant.profile(from: try json(#"{"id":1,"email":"a@b.example"}"#))?.emailVerified == true)
    }

    @Test func numericIDsBecomeText() throws {
        let mapping = ProfileMapping(subject: ["id"], name: ["login"])
        #expect(mapping.profile(from: try json(#"{"id":583231,"login":"octocat"}"#))?.subject == "583231")
        #expect(mapping.profile(from: try json(#"{"id":583231.0}"#))?.subject == "583231")
        #expect(mapping.profile(from: try json(#"{"id":-7}"#))?.subject == "-7")
        #expect(mapping.profile(from: try json(#"{"id":true}"#)) == nil, "a boolean is not an id")
    }

    @Test func noSubjectMeansNoProfile() throws {
        #expect(ProfileMapping.openIDConnect.profile(from: try json(#"{"name":"Jane"}"#)) == nil)
        #expect(ProfileMapping.openIDConnect.profile(from: try json(#"{"sub":null}"#)) == nil)
        #expect(ProfileMapping.openIDConnect.profile(from: try json(#"{"sub":""}"#)) == nil)
        #expect(ProfileMapping.openIDConnect.profile(from: try json(#"["sub"]"#)) == nil)
    }

    @Test func pathsWalkObjectsAndArrays() throws {
        let mapping = ProfileMapping(subject: ["data.0.id"], name: ["data.0.profile.display_name", "data.0.login"],
                                     picture: ["data.0.images.1.url", "data.0.images.0.url"])
        let raw = try json(#"{"data":[{"id":"42","login":"jd","profile":{"display_name":null},"#
            + #""images":[{"url":"https://img.example/0.png"}]}]}"#)
        #expect(mapping.profile(from: raw) == NormalisedProfile(subject: "42", name: "jd",
                                                                picture: "https://img.example/0.png"))
        for path in ["data.1.id", "data.x.id", "data.0.id.more", "data..id", "data.-1.id"] {
            #expect(ProfileMapping(subject: [.path(path)]).profile(from: raw) == nil, "\(path)")
        }
    }

    @Test func templatesFillFromPathsAndNeedEveryPlaceholder() throws {
        let mapping = ProfileMapping(subject: ["id"],
                                     picture: [.template("https://cdn.discordapp.com/avatars/{id}/{avatar}.png")])
        let withAvatar = try json(#"{"id":"80351110224678912","avatar":"8342729096ea3675442027381ff50dfe"}"#)
        #expect(mapping.profile(from: withAvatar)?.picture
            == "https://cdn.discordapp.com/avatars/80351110224678912/8342729096ea3675442027381ff50dfe.png")
        #expect(mapping.profile(from: try json(#"{"id":"8","avatar":null}"#))?.picture == nil)
        #expect(mapping.profile(from: try json(#"{"id":"8"}"#))?.picture == nil)
        let name = ProfileMapping(subject: ["id"], name: ["display_name", .template("{first} {last}")])
        #expect(name.profile(from: try json(#"{"id":"8","first":"Taylor","last":"Kim"}"#))?.name == "Taylor Kim")
    }

    @Test func constantsAndLiteralsCompareEqual() {
        let literal: ProfileSource = "a.b"
        #expect(literal == .path("a.b"))
        #expect(ProfileMapping.openIDConnect == ProfileMapping(
            subject: ["sub"], name: ["name", "preferred_username"], email: ["email"],
            emailVerified: ["email_verified"], picture: ["picture"]))
        #expect(ProfileMapping.openIDConnect != ProviderPreset.github.profileMapping)
    }
}
