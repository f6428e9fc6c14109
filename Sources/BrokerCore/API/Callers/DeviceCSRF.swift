import BrokerCrypto
import HTTPServer
import WireValues

/// The `/device` forms' protection against cross-site requests: a random value in a cookie the
/// browser sends only to the broker's own pages (`SameSite=Strict`, `HttpOnly`; under HTTPS a
/// `__Host-` cookie, which no other site or subdomain can set), and in each form its tag under
/// the broker's key (``BrowserBinding``). A form another site makes the browser submit has no
/// cookie, or cannot know its tag. Under an http public URL (no `__Host-` prefix) a sibling host
/// can plant a cookie of its choosing, and learn its tag from the broker's own pages: there the
/// protection rests on `SameSite=Strict` and on no sibling host being hostile. The same cookie binds the
/// address of the question for a code found (``questionTag(cookie:device:)``) to the browser that
/// typed it.
struct DeviceCSRF: Sendable {
    /// Whether the broker's public URL is HTTPS (the cookie is then `Secure` and `__Host-`).
    let secure: Bool
    let binding: BrowserBinding

    private static let purpose = "device-csrf"

    private var cookieName: String { secure ? "__Host-tb_device" : "tb_device" }

    /// The form token for this browser, and the header that sets its cookie when it had none.
    func token(_ request: Request) -> (token: String, setCookie: HTTPHeader?) {
        if let existing = BrowserBinding.cookie(cookieName, in: request) { return (binding.tag(Self.purpose, existing), nil) }
        let value = OpaqueToken.make(prefix: "")
        let attributes = secure ? "Path=/; Secure; HttpOnly; SameSite=Strict" : "Path=/device; HttpOnly; SameSite=Strict"
        return (binding.tag(Self.purpose, value), HTTPHeader("Set-Cookie", "\(cookieName)=\(value); \(attributes)"))
    }

    /// The browser's cookie, if it has one.
    func cookie(_ request: Request) -> String? {
        BrowserBinding.cookie(cookieName, in: request)
    }

    /// The tag that binds the address of the question for `device` to the browser whose cookie
    /// is `cookie`: another browser, or a page another site makes it load (without the cookie),
    /// is sent to the code's page instead.
    func questionTag(cookie: String, device: SHA256Digest) -> String {
        binding.tag(Self.questionPurpose, Self.question(cookie, device))
    }

    /// Whether `tag` binds the question for `device` to this browser.
    func acceptsQuestion(_ request: Request, device: SHA256Digest, tag: String) -> Bool {
        guard let cookie = cookie(request) else { return false }
        return binding.accepts(tag, Self.questionPurpose, Self.question(cookie, device))
    }

    private static let questionPurpose = "device-question"

    private static func question(_ cookie: String, _ device: SHA256Digest) -> String {
        cookie + "." + Base64URL.encode(device.bytes)
    }

    /// Whether the form's `csrf` field is the tag of the browser's cookie.
    func accepts(_ request: Request, _ form: FormFields) -> Bool {
        guard let cookie = BrowserBinding.cookie(cookieName, in: request), let field = form["csrf"] else { return false }
        return binding.accepts(field, Self.purpose, cookie)
    }
}
