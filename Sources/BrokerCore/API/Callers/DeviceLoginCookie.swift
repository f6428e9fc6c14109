import BrokerCrypto
import Foundation
import HTTPServer

/// Binds a device login to the browser that chose, at `/device`, to sign in: the redirect to the
/// provider sets a cookie whose value is the tag of the login's `state` (``BrowserBinding``), and
/// `/callback` and the account's confirmation accept the login only from a browser that sends
/// it. A provider URL passed to someone else (who would then sign the device in to their own
/// account) ends on an error page there. `SameSite=Lax`, so that the provider's redirect back
/// carries it; `HttpOnly`; under HTTPS a `__Host-` cookie, which no other host can set. One cookie
/// per login, its name from the `state`: a person signing in two devices at once in one browser
/// (two tabs) keeps both bindings, where one name would keep the last only.
struct DeviceLoginCookie: Sendable {
    let secure: Bool
    let binding: BrowserBinding

    private static let purpose = "device-login"

    /// The cookie's name for the login of `state`: 64 bits of its hash, different for each login,
    /// which say nothing of the `state` (256 random bits) and need no key (a rotation of the
    /// binding's keys does not rename the cookies of the logins under way).
    private func name(_ state: String) -> String {
        (secure ? "__Host-tb_device_login_" : "tb_device_login_") + SHA256.hash(Array(("device-login\u{0}" + state).utf8)).hex.prefix(16)
    }
    private var attributes: String { secure ? "Path=/; Secure; HttpOnly; SameSite=Lax" : "Path=/; HttpOnly; SameSite=Lax" }

    /// The header that binds this browser to the login of `state`, whose device code has
    /// `seconds` left: the sign-in and then the account's question may take all of that, and
    /// the cookie stays an hour longer, so that the person's own browser, come back late, hears
    /// that the code is over rather than that it is another browser.
    func set(state: String, seconds: Double) -> HTTPHeader {
        let maxAge = max(0, Int(seconds.rounded(.up))) + Self.lateVisitSeconds
        return HTTPHeader("Set-Cookie", "\(name(state))=\(binding.tag(Self.purpose, state)); \(attributes); Max-Age=\(maxAge)")
    }

    /// How long past its device code the cookie stays.
    static let lateVisitSeconds = 3_600

    /// The cookie of the login of `state` that `request` carries, if any (read while the request
    /// is valid; checked later, once the login is known to be a device's).
    func value(in request: Request, state: String) -> String? {
        BrowserBinding.cookie(name(state), in: request)
    }

    /// Whether `value` (``value(in:state:)``) binds its browser to the login of `state`.
    func accepts(_ value: String?, state: String) -> Bool {
        guard let value else { return false }
        return binding.accepts(value, Self.purpose, state)
    }
}

extension DeviceLoginCookie {
    /// The cookie of a broker at `config`'s public URL: secure under HTTPS.
    init(_ config: BrokerConfig, binding: BrowserBinding) {
        self.init(secure: config.server.publicURL.scheme == "https", binding: binding)
    }
}
