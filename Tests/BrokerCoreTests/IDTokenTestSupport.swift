import BrokerCore
import Foundation
import Synchronization
import Testing

/// The ID-token test vectors in Resources/idtoken, written by make_vectors.py there; the
/// constants repeat that script's.
enum IDTokenVectors {
    static let issuer = "https://idp.example.test"
    static let clientID = "broker-client"
    static let nonce = "n-0S6_WzA2Mj"
    /// Where the tests pretend the provider publishes its keys.
    static let uri = URL(string: "https://idp.example.test/jwks") ?? URL(filePath: "/")
    /// 2100-01-01T00:00:00Z, the `exp` of every token meant to be valid.
    static let farFuture = Date(timeIntervalSince1970: 4_102_444_800)
    /// The `iat` of every token but the timed ones.
    static let issuedAt = Date(timeIntervalSince1970: 1_700_000_000)
    /// `iat` and `exp` of timed.jwt.
    static let timedIssuedAt = Date(timeIntervalSince1970: 1_800_000_000)
    static let timedExpiry = Date(timeIntervalSince1970: 1_800_003_600)

    /// A vector file's text without its trailing newline.
    static func text(_ name: String) throws -> String {
        // The copied Resources folder is the bundle's resource folder on Linux, and a folder
        // inside it on Darwin.
        let file = try #require(
            Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Resources/idtoken")
                ?? Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "idtoken")
        )
        let contents = try String(contentsOf: file, encoding: .utf8)
        return contents.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The token in `name.jwt`.
    static func token(_ name: String) throws -> String {
        try text("\(name).jwt")
    }
}

/// A JWKS source that counts fetches and can change its document or fail between them.
final class CountingJWKSSource: Sendable {
    private struct State {
        var document: String
        var failing = false
        var fetches = 0
    }

    private let state: Mutex<State>
    /// How long each fetch takes, so concurrent callers overlap.
    private let delay: Duration

    init(document: String, delay: Duration = .zero) {
        state = Mutex(State(document: document))
        self.delay = delay
    }

    var fetches: Int { state.withLock { $0.fetches } }

    func serve(_ document: String) { state.withLock { $0.document = document } }

    func fail(_ failing: Bool) { state.withLock { $0.failing = failing } }

    /// The fetch closure for `JWKSCache`.
    var fetch: JWKSCache.Fetch {
        { _ throws(IDTokenError) in
            let (document, failing) = self.state.withLock { state in
                state.fetches += 1
                return (state.document, state.failing)
            }
            if self.delay > .zero { try? await Task.sleep(for: self.delay) }
            if failing { throw .jwksUnavailable("the test source is down") }
            return Array(document.utf8)
        }
    }
}

/// The result of a verification, for `#expect` on either outcome.
func verification(
    _ verifier: IDTokenVerifier,
    _ token: String,
    jwksURI: URL = IDTokenVectors.uri,
    issuer: String = IDTokenVectors.issuer,
    clientID: String = IDTokenVectors.clientID,
    nonce: String? = IDTokenVectors.nonce
) async -> Result<IDTokenClaims, IDTokenError> {
    do throws(IDTokenError) {
        return .success(try await verifier.verify(
            token, jwksURI: jwksURI, issuer: issuer, clientID: clientID, nonce: nonce
        ))
    } catch {
        return .failure(error)
    }
}

/// The error a verification failed with, or nil when it passed.
func verificationError(
    _ verifier: IDTokenVerifier,
    _ token: String,
    jwksURI: URL = IDTokenVectors.uri,
    issuer: String = IDTokenVectors.issuer,
    clientID: String = IDTokenVectors.clientID,
    nonce: String? = IDTokenVectors.nonce
) async -> IDTokenError? {
    let result = await verification(verifier, token, jwksURI: jwksURI, issuer: issuer, clientID: clientID, nonce: nonce)
    if case .failure(let error) = result {
        return error
    }
    return nil
}
