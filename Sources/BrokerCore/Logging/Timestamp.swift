import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// RFC 3339 timestamps in UTC with milliseconds, as logs and the API print them.
enum Timestamp {
    /// The formatted second, reused while it lasts: log lines come many per second.
    private static let cache = Mutex<(second: Int, text: [UInt8])>((-1, []))

    static func now() -> String {
        var bytes: [UInt8] = []
        append(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the current time, e.g. `2026-11-21T12:00:00.123Z`.
    static func append(to output: inout [UInt8]) {
        let now = Date().timeIntervalSince1970
        let second = Int(now)
        let milliseconds = min(999, Int((now - Double(second)) * 1000))
        let prefix = cache.withLock { cache in
            if cache.second != second { cache = (second, Array(format(seconds: second).dropLast().utf8)) }
            return cache.text
        }
        output += prefix
        output += [UInt8(ascii: "."), UInt8(48 + milliseconds / 100), UInt8(48 + milliseconds / 10 % 10), UInt8(48 + milliseconds % 10), UInt8(ascii: "Z")]
    }

    /// `seconds` since the Unix epoch, e.g. `2026-11-21T12:00:00Z`.
    static func format(seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        var text = "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
        text += "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
        return text + "Z"
    }
}
