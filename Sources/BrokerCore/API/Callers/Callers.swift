/// Who is calling, as the handlers learn it: the session a session token names (from memory, or
/// the store the instances share) and the DPoP proofs that come with it or with a token request,
/// each checked and spent once (``withBearerSession(_:_:)``, ``tokenRequestProof(_:)``). A
/// class: the handlers' closures capture it, one reference rather than a retain per field.
final class Callers: Sendable {
    let store: any StateStore
    /// Checks DPoP proofs, and remembers those accepted lately.
    let proofs: ProofChecker
    /// Whether each app binds its sessions to keys (`dpop`) and asks for nonces (`dpop_nonce`).
    let apps: [String: AppConfig]
    let metrics: BrokerMetrics
    /// Unix seconds now; replaceable in tests.
    let now: BrokerClock

    init(store: any StateStore, proofs: ProofChecker, apps: [AppConfig], metrics: BrokerMetrics, now: @escaping BrokerClock) {
        self.store = store
        self.proofs = proofs
        self.apps = Dictionary(apps.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.metrics = metrics
        self.now = now
    }
}
