import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// RFC 3339 timestamps in UTC with milliseconds, as logs and the API print them.
enum Timestamp {
    static func now() -> String {
        let now = Date().timeIntervalSince1970
        return format(seconds: Int(now), milliseconds: Int(now.truncatingRemainder(dividingBy: 1) * 1000))
    }

    /// `seconds` since the Unix epoch, e.g. `2026-11-21T12:00:00.123Z`.
    static func format(seconds: Int, milliseconds: Int? = nil) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        var text = "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
        text += "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
        if let milliseconds { text += "." + pad(Int32(milliseconds), 3) }
        return text + "Z"
    }
}
