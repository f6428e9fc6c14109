import Foundation
import WireValues

/// A successful answer of a provider's token endpoint (RFC 6749 §5.1), in JSON or, as GitHub
/// answers by default, form encoding.
struct TokenResponse: Sendable {
    let accessToken: String
    /// Seconds; nil when the provider does not say (the token is then treated as long-lived).
    let expiresIn: Int?
    let refreshToken: String?
    /// Granted scopes; nil when the provider does not say (RFC 6749 §5.1: then as requested).
    let scopes: [String]?
    let idToken: String?
    /// `token_type: DPoP` (RFC 9449 §5): the access token is bound to the key of the call's proof.
    var boundToKey = false

    /// Parses a token endpoint's body: a token response, or an OAuth error response (RFC 6749
    /// §5.2) — which some providers send with status 200.
    static func parse(_ body: [UInt8], contentType: String?, status: Int) throws(ProviderCallError) -> TokenResponse {
        let fields = try fields(of: body, contentType: contentType)
        if let error = fields["error"]?.stringValue, !error.isEmpty {
            throw .oauth(code: error, description: fields["error_description"]?.stringValue, status: status)
        }
        guard (200..<300).contains(status) else {
            throw .badResponse("the token endpoint answered HTTP \(status)")
        }
        guard let accessToken = fields["access_token"]?.stringValue, !accessToken.isEmpty else {
            throw .badResponse("the token response has no access_token")
        }
        let type = fields["token_type"]?.stringValue?.lowercased()
        let tokens = TokenResponse(
            accessToken: accessToken,
            expiresIn: integer(fields["expires_in"]),
            refreshToken: fields["refresh_token"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 },
            scopes: fields["scope"]?.stringValue.map(splitScopes),
            idToken: fields["id_token"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 },
            boundToKey: type == "dpop"
        )
        if let type, type != "bearer", type != "dpop" {
            throw .unusableTokens("the token type is neither Bearer nor DPoP", tokens)
        }
        return tokens
    }

    /// Scopes separated by spaces, or by commas as GitHub and Spotify's older APIs do.
    static func splitScopes(_ text: String) -> [String] {
        text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
    }

    private static func fields(of body: [UInt8], contentType: String?) throws(ProviderCallError) -> [String: JSONValue] {
        let isForm = contentType?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true
        if isForm {
            guard let text = String(validating: body, as: UTF8.self), let form = try? FormFields(parsing: text) else {
                throw .badResponse("the token response is not a readable form")
            }
            return Dictionary(uniqueKeysWithValues: form.names.map { ($0, JSONValue.string(form[$0] ?? "")) })
        }
        guard let json = try? JSONValue.parse(body), case .object(let members) = json else {
            throw .badResponse("the token response is not a JSON object")
        }
        return Dictionary(members, uniquingKeysWith: { first, _ in first })
    }

    private static func integer(_ value: JSONValue?) -> Int? {
        switch value {
        case .int(let number): number
        case .double(let number) where number.isFinite: Int(number)
        case .string(let text): Int(text)
        default: nil
        }
    }
}
