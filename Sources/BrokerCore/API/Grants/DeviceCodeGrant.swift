import HTTPServer
import WireValues

/// RFC 8628 §3.4: a device's poll with its device code (``DeviceFlow/poll(deviceCode:app:keyThumbprint:)``):
/// the new session once its user has signed in and confirmed the account, else §3.5's error
/// the device acts on.
final class DeviceCodeGrant: GrantType {
    static let type = "urn:ietf:params:oauth:grant-type:device_code"
    static let limitedPerAddress = true
    let devices: DeviceFlow
    /// Where a session granted at another issuer ends.
    let endings: GrantEndings
    let rules: GrantProofRules

    init(devices: DeviceFlow, endings: GrantEndings, rules: GrantProofRules) {
        self.devices = devices
        self.endings = endings
        self.rules = rules
    }

    struct Parameters: Sendable {
        let deviceCode: String
        let app: String
    }

    static func parameters(_ form: FormFields, client: TokenClient) throws(HTTPError) -> Parameters {
        Parameters(deviceCode: try form.required("device_code"), app: try client.required())
    }

    func grant(_ poll: Parameters, at provider: String?, proof: DPoPProof?) async throws(GrantRefusal) -> RedeemedSession {
        let keyThumbprint = try rules.thumbprint(of: proof, for: poll.app)
        let redeemed: RedeemedSession
        do throws(DevicePollRefusal) {
            redeemed = try await devices.poll(deviceCode: poll.deviceCode, app: poll.app, keyThumbprint: keyThumbprint)
        } catch {
            throw .device(error)
        }
        return try await redeemed.atIssuer(of: provider, endings: endings, otherwise: "The device code was issued by another issuer.")
    }
}
