import HTTPServer
import WireValues

/// RFC 8628 §3.4: a device's poll with its device code (``DeviceFlow/poll(deviceCode:app:keyThumbprint:)``):
/// the new session once its user has signed in and confirmed the account, else §3.5's error
/// the device acts on.
struct DeviceCodeGrant: GrantType {
    static let type = "urn:ietf:params:oauth:grant-type:device_code"
    static let limitedPerAddress = true
    let devices: DeviceFlow
    let keys: GrantKeys

    struct Parameters: Sendable {
        let deviceCode: String
        let app: String
    }

    static func parameters(_ form: FormFields, client: TokenClient) throws(HTTPError) -> Parameters {
        Parameters(deviceCode: try form.required("device_code"), app: try client.required())
    }

    func grant(_ poll: Parameters, at provider: String?, proof: DPoPProof?) async throws(GrantRefusal) -> RedeemedSession {
        let keyThumbprint = try keys.thumbprint(of: proof, for: poll.app)
        let redeemed: RedeemedSession
        do throws(DevicePollRefusal) {
            redeemed = try await devices.poll(deviceCode: poll.deviceCode, app: poll.app, keyThumbprint: keyThumbprint)
        } catch {
            throw .device(error)
        }
        return try await redeemed.atIssuer(of: provider, endings: devices.login.endings, otherwise: "The device code was issued by another issuer.")
    }
}
