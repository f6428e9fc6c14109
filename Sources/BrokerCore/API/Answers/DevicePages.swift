import BrokerCrypto
import Foundation
import HTTPServer
import WireValues

/// The pages a person sees at `/device` (RFC 8628 §3.3), in the broker's page shell
/// (``BrokerPage``): forms only to the broker, except on the page whose form leads to the
/// provider's sign-in. Their forms and links start at `base`, the public URL's path (empty at a
/// host's root; `/broker` behind a proxy that serves the broker there), as the redirects do.
struct DevicePages: Sendable {
    /// ``ServerConfig/publicPath``.
    let base: String

    /// Where the user types the code; `userCode` fills it in (from `verification_uri_complete`).
    func entry(userCode: String?, csrf: String, message: String? = nil, status: Int = 200, cookie: HTTPHeader? = nil) -> Response {
        let error = message.map { "<p class=\"error\" role=\"alert\">\(escape($0))</p>" } ?? ""
        return page(title: "Connect a device", status: status, cookie: cookie, body: """
            <h1>Connect a device</h1>
            <p>Enter the code your device shows.</p>\(error)
            <form method="post" action="\(escape(base))/device">
            <label for="user_code">Code</label>
            <input id="user_code" name="user_code" value="\(escape(userCode ?? ""))" autocomplete="off" autocapitalize="characters" \
            spellcheck="false" maxlength="16" aria-describedby="code_hint" required autofocus>
            <p class="hint" id="code_hint">Eight letters, as your device shows them; the dash is optional.</p>
            <input type="hidden" name="csrf" value="\(escape(csrf))">
            <button class="go" type="submit">Continue</button>
            </form>
            """)
    }

    /// What the user is about to allow, with the warning against codes from someone else.
    func confirm(_ waiting: DeviceFlow.Waiting, appName: String, providerName: String, csrf: String) -> Response {
        let scopes = waiting.device.scopes.map { "<li>\(escape($0))</li>" }.joined()
        return page(title: "Sign in a device?", forms: .anywhere, body: """
            <h1>Sign in a device?</h1>
            <p>Code <span class="code">\(escape(UserCode.display(waiting.userCode)))</span></p>
            <dl><dt>App</dt><dd>\(escape(appName))</dd>
            <dt>Signs in with</dt><dd>\(escape(providerName))</dd>
            <dt>Access asked for</dt><dd><ul>\(scopes)</ul></dd></dl>
            <p class="warn"><strong>Only continue if you started this yourself</strong> on a device in front of you, and it \
            shows this same code. Never enter a code that someone sent you: they would get into your account.</p>
            <form method="post" action="\(escape(base))/device/decision">
            <input type="hidden" name="user_code" value="\(escape(waiting.userCode))">
            <input type="hidden" name="csrf" value="\(escape(csrf))">
            <button class="go" type="submit" name="decision" value="approve">Continue to \(escape(providerName))</button>
            <button class="no" type="submit" name="decision" value="deny">Refuse</button>
            </form>
            """)
    }

    /// Where a refusal at ``confirm(_:appName:providerName:csrf:)`` leads: ``denied(headers:)``.
    static let refusedPath = "/device/refused"

    /// The user refused.
    func denied(headers: [HTTPHeader] = []) -> Response {
        page(title: "Device not signed in", extraHeaders: headers, body: """
            <h1>Device not signed in</h1>
            <p>You refused: the device gets no access, and its code no longer works. You can close this window.</p>
            """)
    }

    /// The account that signed in, for its person to confirm or refuse (the device gets nothing
    /// before): at `/device/confirm`, an address of its own that a reload shows again.
    func confirmAccount(_ account: String, app: String, provider: String, device: SHA256Digest, state: String) -> Response {
        page(title: "Is this the right account?", body: """
            <h1>Is this the right account?</h1>
            <p>You signed in as</p>
            <p class="account">\(escape(account))</p>
            <dl><dt>App</dt><dd>\(escape(app))</dd><dt>Signed in with</dt><dd>\(escape(provider))</dd></dl>
            <p>Allow the device to use this account? It gets no access until you do.</p>
            <form method="post" action="\(escape(base))/device/confirm">
            <input type="hidden" name="device" value="\(Base64URL.encode(device.bytes))">
            <input type="hidden" name="state" value="\(escape(state))">
            <button class="go" type="submit" name="decision" value="approve">Allow the device</button>
            <button class="no" type="submit" name="decision" value="deny">Refuse</button>
            </form>
            """)
    }

    /// A device login that failed at `/callback`.
    func refused(_ refusal: LoginRefusal) -> Response {
        let text = refusal.error == "access_denied"
            ? (refusal.description.map { $0 + " The device gets no access." } ?? "The sign-in was refused: the device gets no access.")
            : (refusal.description ?? "The sign-in did not complete.") + " Enter the code again, or start again on the device."
        return failure(text, status: 200)
    }

    /// The address of the account's confirmation for the login of `state` on `device`.
    static func confirmationPath(device: SHA256Digest, state: String) -> String {
        FormFields.url("/device/confirm", adding: [("device", Base64URL.encode(device.bytes)), ("state", state)])
    }

    /// The device is signed in: its person confirmed the account.
    func finished() -> Response {
        page(title: "Device signed in", body: """
            <h1>Device signed in</h1>
            <p>Your device is signed in and will continue on its own. You can close this window.</p>
            """)
    }

    /// A device login finished in a browser other than the one that chose to sign in: a link
    /// someone passed on. Nothing was exchanged; the device gets nothing.
    func otherBrowser() -> Response {
        failure(Self.otherBrowserError.description + " Never follow a sign-in link that someone sent you. "
                    + "If you are signing in a device in front of you, enter the code it shows (Enter a code, below).", status: 403)
    }

    /// The same, for a client that does not ask for a page.
    static let otherBrowserError = HTTPError(
        status: 403, code: "forbidden",
        description: "This sign-in was started in another browser, so it cannot finish here: the device was not signed in.")

    /// A page saying what went wrong.
    func failure(_ message: String, status: Int, headers: [HTTPHeader] = []) -> Response {
        BrokerPage.failure(title: "Device sign-in", message: message, next: BrokerPage.button("Enter a code", to: base + "/device"), status: status, headers: headers)
    }

    private func page(
        title: String, status: Int = 200, forms: BrokerPage.FormTargets = .broker, cookie: HTTPHeader? = nil, extraHeaders: [HTTPHeader] = [],
        body: String
    ) -> Response {
        BrokerPage.render(title: title, status: status, forms: forms, headers: extraHeaders + (cookie.map { [$0] } ?? []), body: body)
    }

    private func escape(_ text: String) -> String {
        BrokerPage.escape(text)
    }
}
