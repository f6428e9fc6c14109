import HTTPServer
import WireValues

/// RFC 6749 §4.1.3: a handoff code with its PKCE verifier, for the app and redirect URI it was
/// issued to (``LoginFlow/redeem(_:)``): a new session, or the session an incremental
/// authorization merged into.
final class AuthorizationCodeGrant: GrantType {
    static let type = "authorization_code"
    static let limitedPerAddress = true
    let login: LoginFlow
    /// Where a session granted at another issuer ends.
    let endings: GrantEndings
    let rules: GrantProofRules

    init(login: LoginFlow, endings: GrantEndings, rules: GrantProofRules) {
        self.login = login
        self.endings = endings
        self.rules = rules
    }

    static func parameters(_ form: FormFields, client: TokenClient) throws(HTTPError) -> HandoffRedemptionRequest {
        HandoffRedemptionRequest(
            code: try form.required("code"), verifier: try form.required("code_verifier"),
            redirectURI: try form.required("redirect_uri"), app: try client.required()
        )
    }

    func grant(_ request: HandoffRedemptionRequest, at provider: String?, proof: DPoPProof?) async throws(GrantRefusal) -> RedeemedSession {
        var request = request
        request.keyThumbprint = try rules.thumbprint(of: proof, for: request.app)
        // Checked before the code is spent: a code refused for another issuer's endpoint is
        // redeemed at its own afterwards, not taken for a replay there.
        request.issuer = provider
        let redeemed: RedeemedSession
        do throws(HandoffRefusal) {
            redeemed = try await login.redeem(request)
        } catch {
            throw .handoff(error)
        }
        return try await redeemed.atIssuer(of: provider, endings: endings, otherwise: "The code was issued by another issuer.")
    }
}
