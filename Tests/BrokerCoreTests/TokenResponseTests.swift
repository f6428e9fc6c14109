import Testing

import HTTPServer
import WireValues
@testable import BrokerCore

struct TokenResponseTests {
    private func parse(_ body: String, type: String? = "application/json", status: Int = 200) throws(ProviderCallError) -> TokenResponse {
        try TokenResponse.parse(Array(body.utf8), contentType: type, status: status)
    }

    @Test func json() throws {
        let response = try parse(#"{"access_token":"at","token_type":"Bearer","expires_in":3600,"refresh_token":"rt","scope":"openid email","id_token":"x.y.z"}"#)
        #expect(response.accessToken == "at")
        #expect(response.expiresIn == 3600)
        #expect(response.refreshToken == "rt")
        #expect(response.scopes == ["openid", "email"])
        #expect(response.idToken == "x.y.z")
    }

    @Test func githubFormEncodingWithCommaScopes() throws {
        let response = try parse("access_token=gho_16C7e42F292c&scope=repo%2Cgist&token_type=bearer", type: "application/x-www-form-urlencoded; charset=utf-8")
        #expect(response.accessToken == "gho_16C7e42F292c")
        #expect(response.scopes == ["repo", "gist"])
        #expect(response.expiresIn == nil)
        #expect(response.refreshToken == nil)
    }

    @Test func missingOptionalFields() throws {
        let response = try parse(#"{"access_token":"at","token_type":"bearer"}"#)
        #expect(response.expiresIn == nil)
        #expect(response.scopes == nil)
        #expect(response.refreshToken == nil)
    }

    @Test func expiresInAsString() throws {
        #expect(try parse(#"{"access_token":"at","expires_in":"120"}"#).expiresIn == 120)
    }

    @Test func oauthErrorEvenWithStatus200() {
        #expect {
            try parse(#"{"error":"bad_verification_code","error_description":"The code passed is incorrect or expired."}"#)
        } throws: { error in
            guard case ProviderCallError.oauth(let code, _, let status) = error else { return false }
            return code == "bad_verification_code" && status == 200
        }
    }

    @Test func invalidGrantEndsTheGrant() {
        #expect {
            try parse(#"{"error":"invalid_grant"}"#, status: 400)
        } throws: { error in
            (error as? ProviderCallError)?.endsGrant == true
        }
    }

    @Test(arguments: [
        (#"{"token_type":"Bearer"}"#, 200),
        ("<html>oops</html>", 200),
        (#"{"access_token":"at"}"#, 500),
    ])
    func unusableAnswers(_ body: String, _ status: Int) {
        #expect {
            try parse(body, status: status)
        } throws: { error in
            guard case ProviderCallError.badResponse = error else { return false }
            return true
        }
    }

    /// Tokens of a type the broker does not know are refused, and handed back for revocation.
    @Test func tokensOfAnUnknownTypeAreHandedBack() {
        #expect {
            try parse(#"{"access_token":"at","refresh_token":"rt","token_type":"mac"}"#, status: 200)
        } throws: { error in
            guard case ProviderCallError.unusableTokens(_, let tokens) = error else { return false }
            return tokens.accessToken == "at" && tokens.refreshToken == "rt"
        }
    }

    @Test func errorsNeverRepeatLongOrOddCodes() {
        #expect(FormFields.printableCode("invalid_grant") == "invalid_grant")
        #expect(FormFields.printableCode("<script>\"x\"") == "unreadable error code")
        #expect(FormFields.printableCode(String(repeating: "a", count: 257)) == "unreadable error code")
        #expect(FormFields.printableCode("invalid request with spaces") == "invalid request with spaces")
    }
}
