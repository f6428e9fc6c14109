import Foundation
import HTTPServer

/// The development provider's sign-in page, in the broker's page shell (``BrokerPage``).
enum DevelopmentPages {
    static func signIn(query: String) -> Response {
        let action = "/dev/authorize?" + BrokerPage.escape(query)
        return BrokerPage.render(title: "Development sign-in", body: """
            <h1>Development identity provider</h1>
            <p>Anyone may sign in here with any name: this provider exists only in development mode.</p>
            <form method="post" action="\(action)">
            <label for="user">Name</label>
            <input class="name" id="user" name="user" value="alice" pattern="[A-Za-z0-9._-]{1,64}" autocomplete="off" required>
            <p class="hint">Letters, digits, dot, dash or underscore: the account the app gets.</p>
            <button class="go" name="decision" value="allow">Allow</button>
            <button class="no" name="decision" value="deny" formnovalidate>Deny</button>
            </form>
            """)
    }
}
