public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
public import Logging
import Synchronization

/// Providers' signing keys (JWKS documents), fetched on first use and kept per `jwks_uri`.
///
/// A token naming a `kid` the cached set lacks (the provider rotated its keys) triggers a
/// refetch, but at most one per `minimumRefetchInterval` per URI, so a flood of tokens with made-up
/// key ids cannot hammer the provider. A set older than an hour is refreshed on next use, and
/// kept if that refresh fails. Concurrent callers share one in-flight fetch. When no set has been
/// fetched yet, every use may try again: there is nothing to fall back on. Safe for concurrent use.
public final class JWKSCache: Sendable {
    /// Fetches the raw JWKS document at a URI.
    public typealias Fetch = @Sendable (URL) async throws(IDTokenError) -> [UInt8]

    private typealias Load = Task<Result<SigningKeySet, IDTokenError>, Never>

    private struct Entry {
        var keys: SigningKeySet?
        var lastFetch: Double?
        var inFlight: Load?
    }

    /// How old a set may grow before its next use fetches it again.
    private static let maximumAge: TimeInterval = 3600

    private let fetch: Fetch
    private let minimumRefetchInterval: TimeInterval?
    private let clock: BrokerClock
    private let entries = Mutex<[URL: Entry]>([:])
    /// With a logger: a key set that cannot be fetched is logged once as that begins and ends.
    private let outages: OutageWatches?

    /// A cache that fetches key sets with `client`.
    public convenience init(
        client: any UpstreamTransport,
        minimumRefetchInterval: Duration = .seconds(60),
        clock: @escaping BrokerClock = systemClock,
        logger: Logger? = nil
    ) {
        self.init(minimumRefetchInterval: minimumRefetchInterval, clock: clock, logger: logger) { uri throws(IDTokenError) in
            try await Self.download(uri, with: client)
        }
    }

    /// A cache that fetches key sets with `fetch`: for a provider inside the process, or for
    /// tests that count fetches.
    public init(
        minimumRefetchInterval: Duration = .seconds(60),
        clock: @escaping BrokerClock = systemClock,
        logger: Logger? = nil,
        fetch: @escaping Fetch
    ) {
        self.fetch = fetch
        self.minimumRefetchInterval = minimumRefetchInterval.seconds
        self.clock = clock
        outages = logger.map { OutageWatches(logger: $0) { "the key set at \($0)" } }
    }

    /// A cache that answers `staticJWKS` (a JWKS document) for every URI and never refetches.
    /// A document that is not a key set makes every verification fail with `jwksUnavailable`.
    public init(staticJWKS: String) {
        let body = Array(staticJWKS.utf8)
        fetch = { _ throws(IDTokenError) in body }
        minimumRefetchInterval = nil
        clock = systemClock
        outages = nil
    }

    /// The key at `uri` for a token's `kid` and algorithm, refetching once on a miss when the
    /// rate limit allows.
    func key(for keyID: String?, algorithm: SignatureAlgorithm, at uri: URL) async throws(IDTokenError) -> SigningKey {
        if let keys = try await keySet(at: uri, afterMiss: false),
           let key = keys.key(for: keyID, algorithm: algorithm) {
            return key
        }
        if let keys = try await keySet(at: uri, afterMiss: true),
           let key = keys.key(for: keyID, algorithm: algorithm) {
            return key
        }
        throw .unknownKey
    }

    /// The set at `uri`: the cached one, or a fetched one. After a miss, nil when the rate limit
    /// forbids a fetch.
    private func keySet(at uri: URL, afterMiss: Bool) async throws(IDTokenError) -> SigningKeySet? {
        let now = clock()
        let (load, fallback): (Load?, SigningKeySet?) = entries.withLock { entries in
            var entry = entries[uri] ?? Entry()
            if let running = entry.inFlight { return (running, entry.keys) }
            if let keys = entry.keys, let lastFetch = entry.lastFetch {
                let age = now - lastFetch
                if afterMiss {
                    guard let interval = minimumRefetchInterval, age >= interval else { return (nil, nil) }
                } else if age < Self.maximumAge || minimumRefetchInterval == nil {
                    return (nil, keys)
                }
            }
            let started = Load { await self.load(uri) }
            entry.inFlight = started
            entry.lastFetch = now
            entries[uri] = entry
            return (started, entry.keys)
        }
        guard let load else { return fallback }
        switch await load.value {
        case .success(let keys): return keys
        case .failure(let error):
            // A stale set still serves while its provider is down; after a miss it cannot help.
            guard !afterMiss, let fallback else { throw error }
            return fallback
        }
    }

    /// Fetches and reads the set at `uri`, and stores it when that worked.
    private func load(_ uri: URL) async -> Result<SigningKeySet, IDTokenError> {
        let result: Result<SigningKeySet, IDTokenError>
        do throws(IDTokenError) {
            let body = try await fetch(uri)
            result = .success(try SigningKeySet.parse(body, host: uri.host ?? "?"))
            outages?(uri.absoluteString).succeeded()
        } catch {
            result = .failure(error)
            outages?(uri.absoluteString).failed(error.description)
        }
        entries.withLock { entries in
            entries[uri]?.inFlight = nil
            if case .success(let keys) = result { entries[uri]?.keys = keys }
        }
        return result
    }

    /// Fetches a JWKS document over HTTP.
    private static func download(_ uri: URL, with client: any UpstreamTransport) async throws(IDTokenError) -> [UInt8] {
        var request = URLRequest(url: uri)
        request.setValue("application/jwk-set+json, application/json", forHTTPHeaderField: "Accept")
        let response: UpstreamResponse
        do {
            response = try await client.send(request)
        } catch {
            throw .jwksUnavailable(error.description)
        }
        guard response.status == 200 else {
            throw .jwksUnavailable("\(uri.host ?? "?") answered HTTP \(response.status)")
        }
        return response.body
    }
}
