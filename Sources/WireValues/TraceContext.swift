/// The W3C Trace Context a request came with (`traceparent`, `tracestate`) and its request id, as
/// the calls made for it pass them on: a provider's token endpoint, an API through the proxy.
///
/// The broker starts no spans of its own (docs/operations.md says why): it carries the caller's
/// trace through unchanged, so that the logs of the caller, the broker (its access log's
/// `trace_id`), the providers and the APIs join on one trace id, and on the request id.
public struct TraceContext: Sendable {
    public let requestID: String
    /// The caller's `traceparent`, when it is one.
    public let traceparent: String?
    /// The caller's `tracestate`, with a valid `traceparent` only.
    public let tracestate: String?

    /// The context of the request whose deferred work is running (the server binds it around a
    /// deferred reply's start, and the tasks it starts inherit it).
    @TaskLocal public static var current: TraceContext?

    /// The longest `tracestate` passed on (W3C Trace Context §3.3.1.5: 512 is what a platform
    /// must at least pass on).
    static let maxTracestateBytes = 512

    public init(requestID: String, traceparent: String?, tracestate: String?) {
        self.requestID = requestID
        self.traceparent = traceparent
        self.tracestate = traceparent == nil ? nil : tracestate.flatMap { state in
            state.utf8.count <= Self.maxTracestateBytes && state.utf8.allSatisfy { (0x20...0x7E).contains($0) } ? state : nil
        }
    }

    /// The trace id: `traceparent`'s 32 hex digits.
    public var traceID: Substring? {
        traceparent.map { $0.dropFirst(3).prefix(32) }
    }

    /// The headers a call made for this request carries.
    public var headers: [(String, String)] {
        var headers: [(String, String)] = []
        appendHeaders(to: &headers)
        return headers
    }

    /// Appends `headers` to a call's own, without an array of their own.
    public func appendHeaders(to headers: inout [(String, String)]) {
        headers.append(("X-Request-Id", requestID))
        if let traceparent {
            headers.append(("traceparent", traceparent))
            if let tracestate { headers.append(("tracestate", tracestate)) }
        }
    }

    /// `value` when it is a `traceparent` (§3.2): a version other than `ff`, a trace id and a
    /// parent id that are not all zeros, flags; in lowercase hex, separated by `-`. A version
    /// above `00` may add fields after a `-`; version `00` may not.
    public static func traceparent(_ value: String?) -> String? {
        guard let value else { return nil }
        let bytes = Array(value.utf8)
        guard bytes.count >= 55, bytes.count <= 256 else { return nil }
        func hex(_ range: Range<Int>) -> Bool {
            bytes[range].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        }
        func zeros(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { $0 == 0x30 } }
        let dash = UInt8(ascii: "-")
        guard hex(0..<2), bytes[0..<2] != [0x66, 0x66], bytes[2] == dash, hex(3..<35), !zeros(3..<35),
              bytes[35] == dash, hex(36..<52), !zeros(36..<52), bytes[52] == dash, hex(53..<55) else { return nil }
        if bytes.count > 55 {
            guard bytes[0..<2] != [0x30, 0x30], bytes[55] == dash, bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else { return nil }
        }
        return value
    }
}
