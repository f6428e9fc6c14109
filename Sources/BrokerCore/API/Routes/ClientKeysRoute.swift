import HTTPServer
import WireValues

/// `GET /providers/{provider}/client-jwks`: the public keys the broker signs its client
/// assertions to this provider with (`private_key_jwt`), the signing key first and, during a
/// rotation, the second key; the URL to register at the provider as the client's `jwks_uri`.
/// Only providers with `private_key_jwt` have it. Public keys only; answered `no-store` like
/// everything the broker serves (providers keep the key sets they fetch by their own rules).
struct ClientKeysRoute: Sendable {
    let providers: [ProviderConfig]

    /// The path of `provider`'s key set.
    static func path(of provider: String) -> String { "/providers/\(provider)/client-jwks" }

    func register(in routes: inout RouteTable) {
        for provider in providers {
            guard let signer = provider.clientAssertionSigner else { continue }
            let keys = Response.json(signer.jwks)
            routes.add("GET", Self.path(of: provider.id), RoutePolicy(caller: .anyone, limit: .none(because: "a key set made at start"), body: .none)) { _ in
                .now(keys)
            }
        }
    }
}
