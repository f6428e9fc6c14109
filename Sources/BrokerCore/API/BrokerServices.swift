import Logging

/// What the broker is made of, assembled once (``assemble(_:store:providers:upstream:trust:logger:metrics:now:)``):
/// the configuration, the flow services, who is calling (``Callers``) and the limits at the door
/// (``Admission``). `serve` and the tests register the routes over it (``BrokerRoutes``), and
/// each route takes from it the few services it uses: no handler or grant depends on the whole.
struct BrokerServices: Sendable {
    let config: BrokerConfig
    let providers: ProviderDirectory
    let login: LoginFlow
    let sessions: SessionOperations
    let devices: DeviceFlow
    let proxy: APIProxy
    let store: any StateStore
    let callers: Callers
    let admission: Admission
    /// Tags that bind a browser to the device pages and to a device login.
    let binding: BrowserBinding
    let metrics: BrokerMetrics
    let logger: Logger
    /// Unix seconds now; replaceable in tests.
    let now: BrokerClock

    /// The one way grants end (``GrantEndings``).
    var endings: GrantEndings { sessions.endings }
}
