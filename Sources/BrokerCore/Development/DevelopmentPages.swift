import Foundation
import HTTPServer

/// The development provider's sign-in page, in the broker's page shell (``BrokerPage``).
enum DevelopmentPages {
    /// Its answer goes to the broker's `/callback`, which sends the browser on to the app's
    /// redirect URI: the form may lead to any app (``BrokerPage/FormTargets/anywhere``).
    static func signIn(query: String) -> Response {
        let action = "/dev/authorize?" + BrokerPage.escape(query)
        return BrokerPage.render(title: "Development sign-in", forms: .anywhere, body: """
            <h1>Development identity provider</h1>
            <p>Anyone may sign in here with any name: this provider exists only in development mode.</p>
            <form method="post" action="\(action)">
            <label for="user">Name</label>
            <input class="name" id="user" name="user" value="alice" pattern="[A-Za-z0-9._\\-]{1,64}" autocomplete="off" required
             aria-describedby="user-hint" title="Letters, digits, dot, dash or underscore, up to 64">
            <p class="hint" id="user-hint">Letters, digits, dot, dash or underscore: the account the app gets.</p>
            <button class="go" name="decision" value="allow">Allow</button>
            <button class="no" name="decision" value="deny" formnovalidate>Deny</button>
            </form>
            <p><a href="/dev/logout">Sign a user out everywhere</a></p>
            """)
    }

    /// "Sign out everywhere": the provider ends a user's sessions with a logout token.
    static func signOut() -> Response {
        BrokerPage.render(title: "Development sign-out", body: """
            <h1>Sign out everywhere</h1>
            <p>The development provider sends the broker a back-channel logout token for this user, as a real \
            OpenID Provider does when a user signs out there or an administrator ends their sessions: \
            every session of the user at this provider ends.</p>
            <form method="post" action="/dev/logout">
            <label for="user">Name</label>
            <input class="name" id="user" name="user" value="alice" pattern="[A-Za-z0-9._\\-]{1,64}" autocomplete="off" required
             aria-describedby="user-hint" title="Letters, digits, dot, dash or underscore, up to 64">
            <p class="hint" id="user-hint">Letters, digits, dot, dash or underscore: the name the user signed in with.</p>
            <button class="go" name="action" value="logout">Sign out everywhere</button>
            </form>
            """)
    }

    /// What the broker answered the logout token (nil: it could not be sent).
    static func signedOut(user: String, brokerStatus: Int?) -> Response {
        guard brokerStatus == 200 else {
            return BrokerPage.failure(
                title: "Sign-out failed",
                message: "The broker did not accept the logout token (\(brokerStatus.map { "HTTP \($0)" } ?? "not sent")); see its log.",
                next: #"<a href="/dev/logout">Try again</a>"#, status: 502)
        }
        return BrokerPage.render(title: "Signed out everywhere", body: """
            <h1>Signed out everywhere</h1>
            <p role="status">The broker accepted the logout token: every session of <strong>\(BrokerPage.escape(user))</strong> \
            at the development provider has ended.</p>
            <p><a href="/dev/logout">Sign out another user</a></p>
            """)
    }
}
