import Testing

@testable import WireValues

struct FormFieldsTests {
    @Test func decodesPercentEscapesAndPlus() throws {
        let fields = try FormFields(parsing: "redirect_uri=myapp%3A%2F%2Foauth&scope=openid+email&state=a%2Bb&empty=")
        #expect(fields["redirect_uri"] == "myapp://oauth")
        #expect(fields["scope"] == "openid email")
        #expect(fields["state"] == "a+b")
        #expect(fields["empty"] == "")
        #expect(fields.names == ["redirect_uri", "scope", "state", "empty"])
    }

    @Test func decodesUTF8() throws {
        let fields = try FormFields(parsing: "login_hint=J%C3%BCrgen%20M")
        #expect(fields["login_hint"] == "Jürgen M")
    }

    @Test func nameWithoutValueIsEmptyAndEmptySegmentsAreSkipped() throws {
        let fields = try FormFields(parsing: "a&&b=2&")
        #expect(fields["a"] == "")
        #expect(fields["b"] == "2")
        #expect(fields.names == ["a", "b"])
    }

    @Test func rejectsRepeatedParameters() {
        let error = #expect(throws: FormFieldsError.self) { try FormFields(parsing: "state=1&code=x&state=2") }
        #expect(error == .repeatedParameter)
        #expect(error?.description == "A parameter appears more than once.")
    }

    @Test(arguments: ["a=%", "a=%2", "a=%zz", "a=%G0", "%=1"])
    func rejectsMalformedEscapes(_ input: String) {
        let error = #expect(throws: FormFieldsError.self) { try FormFields(parsing: input) }
        #expect(error?.description.contains("Malformed percent-encoding") == true)
    }

    @Test(arguments: ["a=%FF", "a=%C3"])
    func rejectsInvalidUTF8(_ input: String) {
        let error = #expect(throws: FormFieldsError.self) { try FormFields(parsing: input) }
        #expect(error?.description == "A parameter value is not valid UTF-8 text.")
    }

    @Test(arguments: ["a=%00", "a=x%00y"])
    func rejectsNUL(_ input: String) {
        let error = #expect(throws: FormFieldsError.self) { try FormFields(parsing: input) }
        #expect(error?.description == "A parameter value contains a NUL character.")
    }

    @Test func rejectsEmptyName() {
        let error = #expect(throws: FormFieldsError.self) { try FormFields(parsing: "=value") }
        #expect(error?.description == "A parameter has an empty name.")
    }

    @Test func errorsNeverEchoValues() {
        let error = #expect(throws: FormFieldsError.self) { try FormFields(parsing: "code=SECRETCODE&code=SECRETCODE") }
        #expect(error?.description.contains("SECRETCODE") == false)
    }

    @Test(arguments: ["ZQXMARK=1&ZQXMARK=2", "ZQXMARK=%zz", "ZQXMARK=%FF", "ZQXMARK%zz=1", "ZQXMARK%FF=1"])
    func errorsNeverEchoNames(_ input: String) {
        let error = #expect(throws: FormFieldsError.self) { try FormFields(parsing: input) }
        #expect(error?.description.contains("ZQXMARK") == false)
    }

    @Test func urlAddsPairsAfterQuestionMarkOrAmpersand() {
        #expect(FormFields.url("https://idp.example/auth", adding: [("a", "1 2")]) == "https://idp.example/auth?a=1+2")
        #expect(FormFields.url("myapp://cb?x=y", adding: [("code", "c"), ("state", "s&t")]) == "myapp://cb?x=y&code=c&state=s%26t")
    }
}
