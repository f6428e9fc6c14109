import HTTPServer

/// What a person gets at an address that is not an endpoint: at `/`, a page saying what this
/// service is and where its health and metadata are; anywhere else — an unknown path, a provider
/// the broker does not have — a 404 page. Only for a browser (it asks for HTML): every other
/// client keeps the API's JSON 404. Links start at `base`, the public URL's path, as the device
/// pages' do (``DevicePages``).
struct LandingPages: Sendable {
    let providers: [(id: String, name: String)]
    let base: String

    func register(in routes: inout RouteTable) {
        let home = home()
        let notFound = notFound()
        routes.setUnmatched { request throws(HTTPError) in
            guard request.wantsHTML else { throw .notFound }
            let isHome = request.path == "/" && (request.method == "GET" || request.method == "HEAD")
            return .now(isHome ? home : notFound)
        }
    }

    private func home() -> Response {
        let metadata = providers.map { provider in
            let path = base + "/.well-known/oauth-authorization-server/providers/\(provider.id)"
            return "<li>\(BrokerPage.escape(provider.name)): <a href=\"\(BrokerPage.escape(path))\">its OAuth metadata</a></li>"
        }.joined()
        return BrokerPage.render(title: "Token broker", body: """
            <h1>Token broker</h1>
            <p>This service signs people in to apps with their identity provider, on the apps' behalf. \
            There is nothing to do here in a browser: if an app sent you here, go back to it.</p>
            <dl><dt>Health</dt><dd><a href="\(link("/healthz"))">/healthz</a> (running) and <a href="\(link("/readyz"))">/readyz</a> (ready to serve)</dd>
            <dt>For apps</dt><dd><ul>\(metadata)</ul></dd>
            <dt>Documentation</dt><dd>Its API (<code>openapi.yaml</code>) and guides (<code>docs/</code>) come with its source.</dd></dl>
            """)
    }

    private func notFound() -> Response {
        BrokerPage.failure(
            title: "Page not found", message: "There is no page at this address.",
            next: "If a link brought you here, go back to the app you came from. "
                + BrokerPage.button("What this service is", to: base + "/", main: false),
            status: 404
        )
    }

    private func link(_ path: String) -> String {
        BrokerPage.escape(base + path)
    }
}

