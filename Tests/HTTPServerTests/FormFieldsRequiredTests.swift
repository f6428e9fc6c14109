import Testing
import WireValues

@testable import HTTPServer

struct FormFieldsRequiredTests {
    @Test func requiredAndOptional() throws {
        let fields = try FormFields(parsing: "a=1&b=")
        #expect(try fields.required("a") == "1")
        #expect(throws: HTTPError.self) { try fields.required("b") }
        #expect(throws: HTTPError.self) { try fields.required("c") }
        #expect(try fields.optional("c") == nil)
        #expect(throws: HTTPError.self) { try fields.optional("b") }
    }

    @Test func aFormThatDoesNotParseIsTheClientsBadRequest() {
        let request = Request(method: "GET", target: "/authorize?state=1&code=x&state=2")
        let error = #expect(throws: HTTPError.self) { try request.query() }
        #expect(error?.status == 400)
        #expect(error?.code == "invalid_request")
        #expect(error?.description == FormFieldsError.repeatedParameter.description)
    }
}
