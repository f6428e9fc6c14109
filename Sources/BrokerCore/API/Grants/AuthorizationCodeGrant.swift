import HTTPServer
import WireValues

/// RFC 6749 §4.1.3: a handoff code with its PKCE verifier, for the app and redirect URI it was
/// issued to (``LoginFlow/redeem(_:)``): a new session, or the session an incremental
/// authorization merged into.
struct AuthorizationCodeGrant: GrantType {
    static let type = "authorization_code"
    static let limitedPerAddress = true
    let request: HandoffRedemptionRequest

    init(_ form: FormFields, client: TokenClient) throws(HTTPError) {
        request = HandoffRedemptionRequest(
            code: try form.required("code"), verifier: try form.required("code_verifier"),
            redirectURI: try form.required("redirect_uri"), app: try client.required()
        )
    }

    func grant(at provider: String?, proof: DPoPProof?, _ services: BrokerServices) async throws(HTTPError) -> RedeemedSession {
        var request = request
        request.keyThumbprint = try services.keyThumbprint(of: proof, for: request.app)
        let redeemed: RedeemedSession
        do throws(HandoffRefusal) {
            redeemed = try await services.login.redeem(request)
        } catch {
            throw error.httpError
        }
        return try await services.granted(redeemed, at: provider,
                                          refusal: "The code was issued by another issuer.")
    }
}
