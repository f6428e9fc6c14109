import Foundation

/// README's Configuration table: each row's `BROKER_*` variables, its keys, and the default its
/// text states ("default 65536", "(default 30 days)", "default `info`", "default none").
enum ReadmeConfigTable {
    static let path = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("README.md").path

    struct Row {
        let variables: [String]
        let keys: [String]
        /// The stated default as written, days turned into seconds; nil when the row states none.
        let statedDefault: String?
    }

    /// The rows of every table line that starts with a `BROKER_*` variable.
    static func rows(of text: String) -> [Row] {
        text.split(separator: "\n").compactMap { line -> Row? in
            guard line.hasPrefix("| `BROKER_") else { return nil }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard cells.count >= 4 else { return nil }
            let variables = cells[1].matches(of: /BROKER_[A-Z_]+/).map { String($0.0) }
            let keys = cells[2].matches(of: /`([a-z_.]+)`/).map { String($0.1) }
            let stated = cells[3].firstMatch(of: /default `?([^\s;,):`]+)`?( days)?/).map { match in
                match.2 == nil ? String(match.1) : Int(match.1).map { String($0 * 86_400) } ?? String(match.1)
            }
            return Row(variables: variables, keys: keys, statedDefault: stated)
        }
    }
}
