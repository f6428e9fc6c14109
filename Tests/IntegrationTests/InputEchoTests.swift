import Foundation
import Testing
import TestWaiting

/// Error bodies say what is wrong without repeating what the client sent (docs/security.md).
@Suite(.serialized)
struct InputEchoTests {
    private static let marker = "ZQXMARKERZQX"

    @Test func noErrorBodyRepeatsAMethodOrAParameterName() throws {
        let broker = try BrokerProcess()
        let form = ["Content-Type": "application/x-www-form-urlencoded"]
        let json = ["Content-Type": "application/json"]
        let answers = [
            try RawHTTP.request(port: broker.port, method: Self.marker, target: "/token"),
            try RawHTTP.request(port: broker.port, method: "POST", target: "/token", headers: form,
                                body: Array("\(Self.marker)=1&\(Self.marker)=2".utf8)),
            try RawHTTP.request(port: broker.port, method: "POST", target: "/token", headers: form,
                                body: Array("\(Self.marker)=%zz".utf8)),
            try RawHTTP.request(port: broker.port, method: "POST", target: "/token", headers: form,
                                body: Array("\(Self.marker)=%FF".utf8)),
            try RawHTTP.request(port: broker.port, method: "POST", target: "/token", headers: json,
                                body: Array(#"{"\#(Self.marker)":1}"#.utf8)),
            try broker.get("/authorize?\(Self.marker)=1&\(Self.marker)=2"),
        ]
        #expect(answers.map(\.status) == [405, 400, 400, 400, 400, 400])
        for answer in answers {
            #expect(!answer.text.contains(Self.marker), "\(answer.text)")
            #expect(try answer.json()["error_description"] as? String != nil)
        }
        // The negative control: the marker does reach the broker (it is in the access log's path).
        let echoed = try broker.get("/\(Self.marker)")
        #expect(echoed.status == 404)
        try waitUntilBlocking("the marked line is in the log") { broker.lines.contains { $0.contains(Self.marker) } }
    }

    @Test func aDuplicateJSONKeyIsTheSame400AsADuplicateFormParameter() throws {
        let broker = try BrokerProcess()
        let form = try RawHTTP.request(port: broker.port, method: "POST", target: "/token",
                                       headers: ["Content-Type": "application/x-www-form-urlencoded"],
                                       body: Array("grant_type=authorization_code&code=a&code=b".utf8))
        let json = try RawHTTP.request(port: broker.port, method: "POST", target: "/token",
                                       headers: ["Content-Type": "application/json"],
                                       body: Array(#"{"grant_type":"authorization_code","code":"a","code":"b"}"#.utf8))
        #expect(form.status == 400)
        #expect(json.status == 400)
        #expect(json.text == form.text)
        // Spelled differently, the same key is still the same key.
        let escaped = try RawHTTP.request(port: broker.port, method: "POST", target: "/token",
                                          headers: ["Content-Type": "application/json"],
                                          body: Array(#"{"code":"a","c\u006fde":"b"}"#.utf8))
        #expect(escaped.text == form.text)
    }
}
