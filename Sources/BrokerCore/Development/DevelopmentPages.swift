import Foundation
import HTTPServer

/// The development provider's sign-in page.
enum DevelopmentPages {
    static func signIn(query: String) -> Response {
        let action = "/dev/authorize?" + query.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Development sign-in</title></head>
            <body><h1>Development identity provider</h1>
            <p>Anyone may sign in here with any name: this provider exists only in development mode.</p>
            <form method="post" action="\(action)">
            <label>Name <input name="user" value="alice" pattern="[A-Za-z0-9._-]{1,64}" required></label>
            <button name="decision" value="allow">Allow</button>
            <button name="decision" value="deny" formnovalidate>Deny</button>
            </form></body></html>
            """
        return Response(
            status: 200,
            headers: [
                HTTPHeader("Content-Type", "text/html; charset=utf-8"),
                HTTPHeader("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'"),
            ],
            body: Array(html.utf8)
        )
    }
}
