import BrokerCrypto
import Logging
import WireValues

/// One sign-in as the log follows it. An id made at `/authorize` — random, never derived from
/// the `state`, a code or a token — rides with the login and then the grant, and names each of
/// the sign-in's lines: `sign-in started`, `signed in at the provider` (or `login failed`), and
/// `sign-in completed` with the session it became; each line also carries the request id and
/// trace id of the request that took that step, which its access-log line carries too.
enum SignInLog {
    /// A new id: 12 hex digits (48 random bits: unique among the sign-ins a log holds).
    static func makeID() -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: SecureRandom.bytes(count: 6).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] }, as: UTF8.self)
    }

    /// The metadata of a line about the sign-in `id`: `more`, the id, and the request's ids.
    static func metadata(_ id: String?, _ more: Logger.Metadata) -> Logger.Metadata {
        var metadata = more
        if let id { metadata["sign_in"] = "\(id)" }
        if let trace = TraceContext.current {
            metadata["request_id"] = "\(trace.requestID)"
            if let traceID = trace.traceID { metadata["trace_id"] = "\(traceID)" }
        }
        return metadata
    }
}
