import BrokerCrypto
import Foundation
import HTTPServer

/// Every page the broker serves to a person: the device pages, the sign-in error page at
/// `/callback` and `/authorize`, the development provider's sign-in. Plain HTML with one shared
/// stylesheet, inline and allowed by its hash in the Content-Security-Policy; no script, no
/// external resource, no framing; readable on a phone (a viewport, a card that keeps a margin at
/// 412 px) and at desktop width.
enum BrokerPage {
    private static let style = """
        *{box-sizing:border-box}\
        body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:1rem;background:#f4f5f7;color:#1d2330;\
        line-height:1.45}\
        main{max-width:28rem;margin:1rem auto;padding:1.5rem;background:#fff;border-radius:.75rem;box-shadow:0 1px 4px #0002}\
        h1{font-size:1.4rem;margin-top:0}label{display:block;font-weight:600;margin-bottom:.5rem}\
        input{width:100%;font:inherit;font-size:1.6rem;letter-spacing:.15em;text-transform:uppercase;\
        text-align:center;padding:.6rem;border:2px solid #aab;border-radius:.5rem}\
        input.name{font-size:1.1rem;letter-spacing:normal;text-transform:none;text-align:left}\
        button,a.button{font:inherit;font-weight:600;padding:.7rem 1.2rem;border-radius:.5rem;border:0;margin:.75rem .5rem 0 0;cursor:pointer}\
        a.button{display:inline-block;text-decoration:none}details{margin-top:1rem;color:#4a5263;font-size:.9rem}\
        .go{background:#1f5fd1;color:#fff}.no{background:#e4e6eb;color:#1d2330}\
        .code{font-family:ui-monospace,monospace;font-size:1.5rem;letter-spacing:.15em}\
        .account{font-size:1.3rem;font-weight:600;word-break:break-all}\
        .hint{color:#4a5263;font-size:.9rem;margin:.5rem 0 0}\
        .warn{background:#fff4d6;border-left:4px solid #e0a200;padding:.75rem;border-radius:.25rem}\
        .error{background:#fde8e8;border-left:4px solid #c81e1e;padding:.75rem;border-radius:.25rem;overflow-wrap:anywhere}\
        dt{font-weight:600}dd{margin:0 0 .5rem 0}ul{margin:.25rem 0;padding-left:1.25rem}
        """
    private static let styleSource = "'sha256-\(Data(SHA256.hash(style).bytes).base64EncodedString())'"

    /// Where a page's forms may go: the browser applies the Content-Security-Policy's
    /// `form-action` to every redirect that follows a submission, not only to the form's action.
    enum FormTargets: Sendable {
        /// The broker only.
        case broker
        /// Anywhere: the submission's redirects end where no source list can name them — at an
        /// app's redirect URI (a private-use scheme, a loopback port, a claimed `https` link), or
        /// at a provider's sign-in, which may send the browser on to another origin before it
        /// shows a page (a federated identity provider, Dex's one connector, Keycloak's
        /// `kc_idp_hint`, a vanity domain).
        case anywhere
    }

    /// A page: `body` is HTML (escape what it quotes); `forms` says where its forms may go.
    static func render(title: String, status: Int = 200, forms: FormTargets = .broker, headers: [HTTPHeader] = [], body: String) -> Response {
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title))</title><style>\(style)</style></head>
            <body><main>
            \(body)
            </main></body></html>
            """
        // Without form-action a submission may go anywhere (it does not fall back to default-src).
        let formAction = switch forms {
        case .broker: " form-action 'self';"
        case .anywhere: ""
        }
        return Response(status: status, headers: [
            HTTPHeader("Content-Type", "text/html; charset=utf-8"),
            HTTPHeader("Content-Security-Policy",
                       "default-src 'none'; style-src \(styleSource);\(formAction) frame-ancestors 'none'; base-uri 'none'"),
        ] + headers, body: Array(html.utf8))
    }

    /// What went wrong in words for the person (escaped here), and what they can do next
    /// (HTML); `detail`, the API's own sentence, which may name parameters, folded away under
    /// "Details" for whoever makes the app.
    static func failure(title: String, message: String, detail: String? = nil, next: String, status: Int,
                        headers: [HTTPHeader] = []) -> Response {
        let details = detail.map { "<details><summary>Details for the app's makers</summary><p>\(escape($0))</p></details>" } ?? ""
        return render(title: title, status: status, headers: headers, body: """
            <h1>\(escape(title))</h1>
            <p class="error" role="alert">\(escape(message))</p>
            <p>\(next)</p>\(details)
            """)
    }

    /// A link that looks like the pages' buttons: `main` for the one most people want.
    static func button(_ label: String, to target: String, main: Bool = true) -> String {
        "<a class=\"button \(main ? "go" : "no")\" href=\"\(escape(target))\">\(escape(label))</a>"
    }

    /// What a failed request means to a person who followed a link, by its status: the API's
    /// sentence names parameters, which mean nothing to them (it goes under ``failure``'s
    /// details).
    static func plainWords(forStatus status: Int) -> String {
        switch status {
        case 429: "Too many sign-ins came from your network just now. Wait a minute, then try again."
        case 500...: "The sign-in service cannot finish this right now. Try again in a moment."
        default: "This sign-in link is incomplete, out of date or already used, so it cannot go on."
        }
    }

    static func escape(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
