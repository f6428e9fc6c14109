import HTTPServer
import WireValues

/// Why a call to a provider's token, revocation or userinfo endpoint failed.
enum ProviderCallError: Error, Sendable {
    /// The provider answered an OAuth error (RFC 6749 §5.2), e.g. `invalid_grant`.
    case oauth(code: String, description: String?, status: Int)
    /// The provider could not be reached, timed out, or sent too much.
    case unavailable(UpstreamError)
    /// The provider answered something the broker cannot use.
    case badResponse(String)
    /// The userinfo endpoint rejected the access token (HTTP 401).
    case unauthorized

    /// Only the provider saying `invalid_grant` ends a grant; everything else may pass.
    var endsGrant: Bool {
        if case .oauth(code: "invalid_grant", _, _) = self { return true }
        return false
    }

    /// The error the client sees. Descriptions name what failed, never a token or a body.
    var httpError: HTTPError {
        switch self {
        case .oauth(let code, _, let status):
            .upstreamError("The provider refused the request (\(FormFields.printableCode(code)), HTTP \(status)).")
        case .unavailable(let error):
            .upstreamUnavailable("The provider is unavailable: \(error.description).")
        case .badResponse(let reason):
            .upstreamError("The provider's answer was unusable: \(reason).")
        case .unauthorized:
            .upstreamError("The provider rejected the access token.")
        }
    }
}

extension FormFields {
    /// Whether `text` fits RFC 6749's `error` / `error_description` syntax (`%x20-21 / %x23-5B /
    /// %x5D-7E`) in at most `limit` bytes.
    static func isOAuthErrorText(_ text: String, limit: Int = 256) -> Bool {
        !text.isEmpty && text.utf8.count <= limit
            && text.utf8.allSatisfy { $0 == 0x20 || $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }

    /// An OAuth error code as safe to repeat in a message; anything else is not repeated.
    static func printableCode(_ code: String) -> String {
        isOAuthErrorText(code) ? code : "unreadable error code"
    }
}
