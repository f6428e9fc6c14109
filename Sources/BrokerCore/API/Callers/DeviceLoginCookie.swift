import BrokerCrypto
import Foundation
import HTTPServer

/// Binds a device login to the browser that chose, at `/device`, to sign in: the redirect to the
/// provider sets a cookie holding the tag of the login's `state` (``BrowserBinding``), and
/// `/callback` and the account's confirmation accept the login only from a browser that sends
/// it. A provider URL passed to someone else (who would then sign the device in to their own
/// account) ends on an error page there. `SameSite=Lax`, so that the provider's redirect back
/// carries it; `HttpOnly`; under HTTPS a `__Host-` cookie, which no other host can set.
///
/// One cookie, holding the tags of the browser's last ``kept`` logins, newest first, joined by
/// `.`: a person signing in several devices at once in one browser (two tabs) keeps each
/// binding, and a batch of sign-ins does not grow the browser's `Cookie` header without bound.
/// A browser with one login under way holds one tag, as brokers before this one wrote it.
struct DeviceLoginCookie: Sendable {
    let secure: Bool
    let binding: BrowserBinding

    private static let purpose = "device-login"
    /// Logins under way that one browser keeps bound (each tag 43 characters and a separator).
    static let kept = 8

    private var name: String { secure ? "__Host-tb_device_login" : "tb_device_login" }
    private var attributes: String { secure ? "Path=/; Secure; HttpOnly; SameSite=Lax" : "Path=/; HttpOnly; SameSite=Lax" }

    /// The header that binds this browser to the login of `state` (besides the logins of `bound`,
    /// the tags its cookie held, up to ``kept`` in all), whose device code has `seconds` left: the
    /// sign-in and then the account's question may take all of that, and the cookie stays an hour
    /// longer, so that the person's own browser, come back late, hears that the code is over
    /// rather than that it is another browser.
    func set(state: String, seconds: Double, keeping bound: [String]) -> HTTPHeader {
        let maxAge = max(0, Int(seconds.rounded(.up))) + Self.lateVisitSeconds
        let tags = [binding.tag(Self.purpose, state)] + bound.prefix(Self.kept - 1)
        return HTTPHeader("Set-Cookie", "\(name)=\(tags.joined(separator: ".")); \(attributes); Max-Age=\(maxAge)")
    }

    /// How long past its device code the cookie stays.
    static let lateVisitSeconds = 3_600

    /// The tags of the cookie `request` carries (read while the request is valid; checked later,
    /// once the login is known to be a device's): none for a missing or malformed cookie.
    func tags(in request: Request) -> [String] {
        guard let value = BrowserBinding.cookieValue(name, in: request) else { return [] }
        let tags = value.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard tags.count <= Self.kept, tags.allSatisfy({ $0.utf8.count == 43 && Base64URL.decode($0)?.count == 32 }) else { return [] }
        return tags
    }

    /// Whether `tags` (``tags(in:)``) bind their browser to the login of `state`.
    func accepts(_ tags: [String], state: String) -> Bool {
        tags.contains { binding.accepts($0, Self.purpose, state) }
    }
}

extension DeviceLoginCookie {
    /// The cookie of a broker at `config`'s public URL: secure under HTTPS.
    init(_ config: BrokerConfig, binding: BrowserBinding) {
        self.init(secure: config.server.publicURL.scheme == "https", binding: binding)
    }
}
