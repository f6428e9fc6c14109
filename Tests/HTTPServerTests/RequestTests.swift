import Testing
import WireValues

@testable import HTTPServer

struct RequestTests {
    @Test func splitsPathAndQuery() throws {
        let request = Request(method: "GET", target: "/authorize?provider=dev&app=demo")
        #expect(request.path == "/authorize")
        #expect(request.rawQuery == "provider=dev&app=demo")
        #expect(try request.query()["app"] == "demo")
        let bare = Request(method: "GET", target: "/healthz")
        #expect(bare.rawQuery == nil)
        #expect(try bare.query().names.isEmpty)
    }

    @Test func headersAreCaseInsensitive() {
        let request = Request(method: "GET", target: "/", headers: ["Content-Type": "text/plain"])
        #expect(request.header("content-type") == "text/plain")
        #expect(request.header("CONTENT-TYPE") == "text/plain")
        #expect(request.header("Accept") == nil)
    }

    @Test func formBody() throws {
        let request = Request(
            method: "POST", target: "/token",
            headers: ["Content-Type": "application/x-www-form-urlencoded; charset=utf-8"],
            body: Array("grant_type=authorization_code&code=abc+def".utf8)
        )
        let form = try request.form()
        #expect(form["grant_type"] == "authorization_code")
        #expect(form["code"] == "abc def")
    }

    @Test func jsonBodyOfStrings() throws {
        let request = Request(
            method: "POST", target: "/token", headers: ["Content-Type": "application/json"],
            body: Array(#"{"code":"x","app":"demo"}"#.utf8)
        )
        #expect(try request.form()["app"] == "demo")
    }

    @Test(arguments: [#"{"code":1}"#, "[1,2]", "{not json"])
    func jsonBodyMustBeObjectOfStrings(_ body: String) {
        let request = Request(method: "POST", target: "/token", headers: ["Content-Type": "application/json"], body: Array(body.utf8))
        let error = #expect(throws: HTTPError.self) { try request.form() }
        #expect(error?.status == 400)
    }

    @Test(arguments: [#"{"code":"a","code":"b"}"#, #"{"code":"a","c\u006fde":"b"}"#, #"{"a":"1","code":"a","b":"2","code":"a"}"#])
    func duplicateJSONKeysAreTheDuplicateParameterError(_ body: String) throws {
        let request = Request(method: "POST", target: "/token", headers: ["Content-Type": "application/json"], body: Array(body.utf8))
        let json = #expect(throws: HTTPError.self) { try request.form() }
        let form = #expect(throws: FormFieldsError.self) { try FormFields(parsing: "code=a&code=b") }
        #expect(json?.status == 400)
        #expect(json?.description == form?.description)
    }

    @Test func colonsAndKeysInsideStringValuesAreNotMembers() throws {
        let request = Request(method: "POST", target: "/token", headers: ["Content-Type": "application/json"],
                              body: Array(#"{"a":"x:y,\"z\":","b":"{\"a\":1}"}"#.utf8))
        #expect(try request.form()["a"] == #"x:y,"z":"#)
    }

    @Test func aNonStringValueIsRefusedWithoutNamingIt() {
        let request = Request(method: "POST", target: "/token", headers: ["Content-Type": "application/json"],
                              body: Array(#"{"ZQXMARK":1}"#.utf8))
        let error = #expect(throws: HTTPError.self) { try request.form() }
        #expect(error?.description.contains("ZQXMARK") == false)
    }

    /// `\u0000` is valid JSON, but a JSON body is held to a form's rules: `%00` is refused there.
    @Test(arguments: [#"{"code":"a\u0000b"}"#, #"{"co\u0000de":"a"}"#])
    func aNULInAJSONBodyIsRefusedAsInAForm(_ body: String) {
        let request = Request(method: "POST", target: "/token", headers: ["Content-Type": "application/json"], body: Array(body.utf8))
        let error = #expect(throws: HTTPError.self) { try request.form() }
        #expect(error?.status == 400)
        #expect(error?.description == "A parameter of the JSON body contains a NUL character.")
    }

    @Test func otherMediaTypesAre415() {
        let request = Request(method: "POST", target: "/token", headers: ["Content-Type": "text/plain"], body: Array("a=1".utf8))
        let error = #expect(throws: HTTPError.self) { try request.form() }
        #expect(error?.status == 415)
    }

    @Test func emptyBodyWithoutContentTypeIsEmptyForm() throws {
        #expect(try Request(method: "POST", target: "/refresh").form().names.isEmpty)
    }
}
