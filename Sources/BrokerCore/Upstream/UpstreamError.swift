#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Foundation

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

    init(_ error: URLError, host: String) {
        switch error.code {
        case .timedOut: self.init(.timedOut, host: host)
        case .cancelled, .dataLengthExceedsMaximum: self.init(.tooLarge, host: host)
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected:
            self.init(.tls, host: host)
        default: self.init(.unreachable, host: host)
        }
    }

    public static func unreachable(host: String) -> UpstreamError { UpstreamError(.unreachable, host: host) }
    public static func tooLarge(host: String) -> UpstreamError { UpstreamError(.tooLarge, host: host) }
    public static func busy(host: String) -> UpstreamError { UpstreamError(.busy, host: host) }


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
