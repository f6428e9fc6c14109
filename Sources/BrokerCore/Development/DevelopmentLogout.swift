import BrokerCrypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPServer
import WireValues

/// "Sign out everywhere" at the development provider: `GET /dev/logout` asks for a name, and
/// `POST /dev/logout` ends that user's sessions the way a real OpenID Provider does — a logout
/// token (OpenID Connect Back-Channel Logout 1.0: `sub`, a fresh `jti`, the back-channel logout
/// event), signed with the provider's ID-token key, POSTed over HTTP to the broker's
/// back-channel logout endpoint, which verifies it as any provider's. Development mode only: the
/// provider signs anyone in, and so signs anyone out (no cross-site check; loopback only).
struct DevelopmentLogout: Sendable {
    let issuer: String
    /// Where the broker takes this provider's logout tokens.
    let backChannelLogoutURL: URL
    let signer: DevelopmentSigner
    let client: UpstreamClient
    let now: @Sendable () -> Double

    func register(in routes: inout RouteTable) {
        routes.add("GET", "/dev/logout", DevelopmentMode.policy(body: .none)) { _ in .now(DevelopmentPages.signOut()) }
        routes.add("POST", "/dev/logout", DevelopmentMode.policy(body: .form)) { [self] request throws(HTTPError) in
            let user = try DevelopmentProvider.validUser(try request.form().required("user"))
            return .deferred { [self] in await signOut(user) }
        }
    }

    private func signOut(_ user: String) async -> Response {
        let claims = JSONValue.object([
            ("iss", .string(issuer)),
            ("aud", .string(DevelopmentMode.clientID)),
            ("iat", .int(Int(now()))),
            ("jti", .string(Base64URL.encode(SecureRandom.bytes(count: 16)))),
            ("events", .object([(LogoutTokenVerifier.event, .object([]))])),
            ("sub", .string(DevelopmentProvider.subject(user))),
        ])
        guard let token = try? signer.sign(claims: claims, type: "logout+jwt") else {
            return DevelopmentPages.signedOut(user: user, brokerStatus: nil)
        }
        var request = URLRequest(url: backChannelLogoutURL)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(FormFields.encode([("logout_token", token)]).utf8)
        let status = (try? await client.send(request))?.status
        return DevelopmentPages.signedOut(user: user, brokerStatus: status)
    }
}
