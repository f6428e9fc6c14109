extension Request {
    /// How much the caller's `Accept` wants `mediaType` (RFC 9110 §12.5.1): the `q` of the range
    /// that names it exactly (type and subtype compared without case), 1 when it gives none;
    /// nil when no range names it, or there is no `Accept`. Wildcards (`*/*`, `text/*`) name
    /// nothing here: every client sends them, and a page or a JSON answer is chosen only for a
    /// caller that asked for it by name.
    public func acceptQuality(of mediaType: String) -> Double? {
        guard let accept = joinedHeader("Accept") else { return nil }
        var best: Double?
        for range in accept.split(separator: ",") {
            let parts = range.split(separator: ";")
            guard let type = parts.first, type.trimmingSpaces.lowercased() == mediaType else { continue }
            var quality = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, pair[0].trimmingSpaces.lowercased() == "q" else { continue }
                // A q that is not a number in 0...1 (RFC 9110 §12.4.2) counts as not given.
                if let value = Double(String(pair[1].trimmingSpaces)), (0...1).contains(value) { quality = value }
            }
            best = max(best ?? 0, quality)
        }
        return best
    }

    /// Whether the caller asked for JSON by name, at least as much as for HTML: it reads JSON
    /// answers (API clients name `application/json`; browsers never do).
    public var wantsJSON: Bool {
        guard let json = acceptQuality(of: "application/json"), json > 0 else { return false }
        return json >= (acceptQuality(of: "text/html") ?? 0)
    }

    /// Whether the caller asked for HTML by name, more than for JSON: a person at a browser.
    public var wantsHTML: Bool {
        guard let html = acceptQuality(of: "text/html"), html > 0 else { return false }
        return html > (acceptQuality(of: "application/json") ?? 0)
    }
}
