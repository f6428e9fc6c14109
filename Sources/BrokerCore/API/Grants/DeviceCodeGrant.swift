import HTTPServer
import WireValues

/// RFC 8628 §3.4: a device's poll with its device code (``DeviceFlow/poll(deviceCode:app:)``):
/// the new session once its user has signed in and confirmed the account, else §3.5's error
/// the device acts on.
struct DeviceCodeGrant: GrantType {
    static let type = "urn:ietf:params:oauth:grant-type:device_code"
    static let limitedPerAddress = true
    let deviceCode: String
    let app: String

    init(_ form: FormFields, client: TokenClient) throws(HTTPError) {
        deviceCode = try form.required("device_code")
        app = try client.required()
    }

    func grant(at provider: String?, proof: DPoPProof?, _ services: BrokerServices) async throws(HTTPError) -> RedeemedSession {
        let keyThumbprint = try services.keyThumbprint(of: proof, for: app)
        let redeemed: RedeemedSession
        do throws(DevicePollRefusal) {
            redeemed = try await services.devices.poll(deviceCode: deviceCode, app: app, keyThumbprint: keyThumbprint)
        } catch {
            throw error.httpError
        }
        return try await services.granted(redeemed, at: provider,
                                          refusal: "The device code was issued by another issuer.")
    }
}
