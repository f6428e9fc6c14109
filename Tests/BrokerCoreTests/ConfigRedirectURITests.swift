import BrokerCore
import Testing

struct ConfigRedirectURITests {
    private func reason(_ text: String) -> String? {
        do {
            _ = try RedirectURI(parsing: text)
            return nil
        } catch {
            #expect(error.problems.count == 1)
            #expect(error.problems.first?.key == "redirect_uri")
            return error.problems.first?.message
        }
    }

    @Test(arguments: [
        ("myapp://oauth", RedirectURI.Kind.customScheme),
        ("com.example.app:/oauth2redirect", .customScheme),
        ("com.example.app:/oauth2redirect?from=broker", .customScheme),
        ("https://app.example.com/cb", .https),
        ("https://app.example.com:8443/cb?x=1", .https),
        ("http://127.0.0.1/callback", .loopback),
        ("http://127.0.0.1:51000/callback", .loopback),
        ("http://[::1]:8080/cb", .loopback),
        ("http://127.0.0.1", .loopback),
    ])
    func acceptedURIs(text: String, kind: RedirectURI.Kind) throws {
        let uri = try RedirectURI(parsing: text)
        #expect(uri.raw == text)
        #expect(uri.kind == kind)
        #expect(uri.description == text)
    }

    @Test(arguments: [
        ("http://localhost/callback", "RFC 8252 §8.3"),
        ("http://localhost:8080/callback", "use http://127.0.0.1"),
        ("http://app.example.com/cb", "plain http is only allowed for the loopback addresses 127.0.0.1 and [::1]"),
        ("http://127.0.0.2/cb", "plain http is only allowed for the loopback"),
        ("http://10.0.0.1/cb", "plain http is only allowed for the loopback"),
        ("https://app.example.com/cb#section", "must not contain a fragment"),
        ("myapp://oauth#x", "must not contain a fragment"),
        ("javascript:alert(1)", "the scheme javascript: is not allowed"),
        ("data:text/html,hello", "the scheme data: is not allowed"),
        ("file:///etc/passwd", "the scheme file: is not allowed"),
        ("https:///cb", "an https redirect URI must have a host"),
        ("https:/cb", "an https redirect URI must have a host"),
        ("http:/cb", "an http redirect URI must have a host"),
        ("/relative/cb", "has no scheme"),
        ("app.example.com/cb", "has no scheme"),
        ("", "must not be empty"),
        ("myapp://o auth", "without spaces"),
        ("MyApp://oauth", "the scheme must be lower case"),
        ("myapp:", "needs something after myapp:"),
        ("https://user:pw@app.example.com/cb", "must not contain user information"),
        ("http://127.0.0.1:99999/cb", "plain http is only allowed for the loopback"),
    ])
    func refusedURIs(text: String, expected: String) {
        let message = reason(text)
        #expect(message?.contains(expected) == true, "\(text): \(message ?? "accepted")")
    }

    @Test func loopbackMatchesAnyPortButEverythingElseExactly() throws {
        let loopback = try RedirectURI(parsing: "http://127.0.0.1/callback")
        #expect(loopback.matches("http://127.0.0.1/callback"))
        #expect(loopback.matches("http://127.0.0.1:51234/callback"))
        #expect(loopback.matches("http://127.0.0.1:1/callback"))
        #expect(!loopback.matches("http://127.0.0.1:51234/callback/"))
        #expect(!loopback.matches("http://127.0.0.1:51234/other"))
        #expect(!loopback.matches("http://127.0.0.1:51234/callback?x=1"))
        #expect(!loopback.matches("http://127.0.0.1:51234/callback#frag"))
        #expect(!loopback.matches("http://127.0.0.1:/callback"))
        #expect(!loopback.matches("http://127.0.0.1:99999/callback"))
        #expect(!loopback.matches("http://localhost:51234/callback"))
        #expect(!loopback.matches("http://[::1]:51234/callback"))
        #expect(!loopback.matches("https://127.0.0.1:51234/callback"))
        #expect(!loopback.matches("http://127.0.0.1.evil.example/callback"))
        #expect(!loopback.matches("http://127.0.0.1@evil.example/callback"))

        let withPort = try RedirectURI(parsing: "http://[::1]:8000/cb?app=1")
        #expect(withPort.matches("http://[::1]:9000/cb?app=1"))
        #expect(withPort.matches("http://[::1]/cb?app=1"))
        #expect(!withPort.matches("http://[::1]:9000/cb?app=2"))

        let https = try RedirectURI(parsing: "https://app.example.com/cb")
        #expect(https.matches("https://app.example.com/cb"))
        #expect(!https.matches("https://app.example.com:443/cb"))
        #expect(!https.matches("https://app.example.com/cb/"))
        #expect(!https.matches("https://APP.example.com/cb"))
        #expect(!https.matches("https://app.example.com/cb?x=1"))

        let custom = try RedirectURI(parsing: "myapp://oauth")
        #expect(custom.matches("myapp://oauth"))
        #expect(!custom.matches("myapp://oauth/"))
        #expect(!custom.matches("myapp://OAUTH"))
    }

    @Test func appMatchesItsRegisteredURIs() throws {
        let app = AppConfig(id: "demo", redirectURIs: [
            try RedirectURI(parsing: "myapp://oauth"),
            try RedirectURI(parsing: "https://app.example.com/cb"),
            try RedirectURI(parsing: "http://127.0.0.1/callback"),
        ], providers: ["corp"])
        #expect(app.matchRegistered("myapp://oauth")?.raw == "myapp://oauth")
        #expect(app.matchRegistered("http://127.0.0.1:4567/callback")?.raw == "http://127.0.0.1/callback")
        #expect(app.matchRegistered("https://app.example.com/cb")?.kind == .https)
        #expect(app.matchRegistered("https://app.example.com:8443/cb") == nil)
        #expect(app.matchRegistered("myapp://oauth?x=1") == nil)
        #expect(app.matchRegistered("https://evil.example/cb") == nil)
        #expect(app.allows(provider: "corp"))
        #expect(!app.allows(provider: "github"))
        #expect(AppConfig(id: "all", redirectURIs: []).allows(provider: "anything"))
    }
}
