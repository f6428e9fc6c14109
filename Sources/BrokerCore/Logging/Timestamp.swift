import Foundation
import WireValues

/// RFC 3339 timestamps in UTC, as logs and the API print them. The calendar date is computed
/// from the day number (days-from-civil inverted, Howard Hinnant's algorithm): no `gmtime`, no
/// lock and no allocation, because every access-log line starts with one.
enum Timestamp {
    /// Now with milliseconds, e.g. `2026-11-21T12:00:00.123Z`.
    static func now() -> String {
        var bytes: [UInt8] = []
        append(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends now with milliseconds, e.g. `2026-11-21T12:00:00.123Z`.
    static func append(to output: inout [UInt8]) {
        append(Date().timeIntervalSince1970, to: &output)
    }

    /// Appends a time in seconds since the Unix epoch with milliseconds, e.g.
    /// `2026-11-21T12:00:00.123Z`.
    static func append(_ time: Double, to output: inout [UInt8]) {
        let second = Int(time.rounded(.down))
        appendSecond(second, to: &output)
        let milliseconds = min(999, Int((time - Double(second)) * 1000))
        output.append(UInt8(ascii: "."))
        output.append(decimal: milliseconds, minimumDigits: 3)
        output.append(UInt8(ascii: "Z"))
    }

    /// `seconds` since the Unix epoch, e.g. `2026-11-21T12:00:00Z`.
    static func format(seconds: Int) -> String {
        var bytes: [UInt8] = []
        appendSecond(seconds, to: &bytes)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `YYYY-MM-DDTHH:MM:SS` of a Unix time in seconds.
    private static func appendSecond(_ seconds: Int, to output: inout [UInt8]) {
        let (days, secondOfDay) = seconds.floorDivided(by: 86_400)
        let (year, month, day) = civil(fromDays: days)
        output.append(decimal: year, minimumDigits: 4)
        output.append(UInt8(ascii: "-"))
        output.append(decimal: month, minimumDigits: 2)
        output.append(UInt8(ascii: "-"))
        output.append(decimal: day, minimumDigits: 2)
        output.append(UInt8(ascii: "T"))
        output.append(decimal: secondOfDay / 3600, minimumDigits: 2)
        output.append(UInt8(ascii: ":"))
        output.append(decimal: secondOfDay / 60 % 60, minimumDigits: 2)
        output.append(UInt8(ascii: ":"))
        output.append(decimal: secondOfDay % 60, minimumDigits: 2)
    }

    /// The proleptic Gregorian date of a day counted from 1970-01-01.
    static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468 // days from 0000-03-01
        let (era, _) = shifted.floorDivided(by: 146_097)
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension Int {
    /// Quotient rounded down and the remainder that goes with it (0 ≤ remainder < divisor).
    fileprivate func floorDivided(by divisor: Int) -> (quotient: Int, remainder: Int) {
        let remainder = self % divisor
        return remainder < 0 ? (self / divisor - 1, remainder + divisor) : (self / divisor, remainder)
    }
}
