import APIClient

/// Why a call to a provider failed. Descriptions name the host, never a URL (whose query might
/// carry a token) and never a body.
public struct UpstreamError: Error, Sendable, CustomStringConvertible {
    private enum Kind: Sendable {
        case timedOut
        case unreachable
        case tooLarge
        case tls
        case busy
    }

    private let kind: Kind
    public let host: String

    private init(_ kind: Kind, host: String) {
        self.kind = kind
        self.host = host
    }

    init(_ error: APIExchangeError, host: String) {
        switch error {
        case .timedOut: self.init(Kind.timedOut, host: host)
        case .tooLarge: self.init(Kind.tooLarge, host: host)
        case .tls: self.init(Kind.tls, host: host)
        case .busy: self.init(Kind.busy, host: host)
        case .unreachable, .failed, .addressRefused: self.init(Kind.unreachable, host: host)
        }
    }

    public static func unreachable(host: String) -> UpstreamError { UpstreamError(Kind.unreachable, host: host) }
    public static func tooLarge(host: String) -> UpstreamError { UpstreamError(Kind.tooLarge, host: host) }
    public static func busy(host: String) -> UpstreamError { UpstreamError(Kind.busy, host: host) }

    /// What a metric calls it.
    public var outcome: String {
        switch kind {
        case .timedOut: "timed_out"
        case .unreachable: "unreachable"
        case .tooLarge: "too_large"
        case .tls: "tls"
        case .busy: "busy"
        }
    }

    public var description: String {
        switch kind {
        case .timedOut: "\(host) did not answer in time"
        case .unreachable: "\(host) could not be reached"
        case .tooLarge: "\(host) sent a response larger than the limit"
        case .tls: "the TLS connection to \(host) failed verification"
        case .busy: "too many calls to providers are in flight; \(host) was not called"
        }
    }
}
