import BrokerCrypto
import HTTPServer
import Foundation
import WireValues

/// The `/device` forms' protection against cross-site requests: a random token in a cookie the
/// browser sends only to the broker's own pages (`SameSite=Strict`, `HttpOnly`; under HTTPS a
/// `__Host-` cookie, which no other site or subdomain can set), repeated in each form. A form
/// another site makes the browser submit has no cookie, or cannot know its value.
struct DeviceCSRF: Sendable {
    /// Whether the broker's public URL is HTTPS (the cookie is then `Secure` and `__Host-`).
    let secure: Bool

    private var cookieName: String { secure ? "__Host-tb_device" : "tb_device" }

    /// The browser's token, or a fresh one and the header that sets it.
    func token(_ request: Request) -> (token: String, setCookie: HTTPHeader?) {
        if let existing = cookie(request) { return (existing, nil) }
        let token = OpaqueToken.make(prefix: "")
        let attributes = secure ? "Path=/; Secure; HttpOnly; SameSite=Strict" : "Path=/device; HttpOnly; SameSite=Strict"
        return (token, HTTPHeader("Set-Cookie", "\(cookieName)=\(token); \(attributes)"))
    }

    /// Whether the form's `csrf` field is the browser's cookie token.
    func accepts(_ request: Request, _ form: FormFields) -> Bool {
        guard let cookie = cookie(request), let field = form["csrf"] else { return false }
        return constantTimeEquals(cookie, field)
    }

    private func cookie(_ request: Request) -> String? {
        guard let header = request.header("Cookie") else { return nil }
        for pair in header.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == cookieName else { continue }
            let value = parts[1].trimmingCharacters(in: .whitespaces)
            // Only a token this broker could have set.
            guard value.utf8.count == 43, Base64URL.decode(value)?.count == 32 else { return nil }
            return value
        }
        return nil
    }
}
