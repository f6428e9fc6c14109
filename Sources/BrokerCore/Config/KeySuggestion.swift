/// Suggestions for misspelt keys and ids.
enum KeySuggestion {
    /// The candidate closest to `word` when its distance is at most `maxDistance`; ties go to the
    /// earlier candidate.
    static func nearest(to word: String, in candidates: [String], maxDistance: Int = 2) -> String? {
        var best: (candidate: String, distance: Int)?
        for candidate in candidates where candidate != word {
            let distance = editDistance(word, candidate)
            if distance <= maxDistance, distance < (best?.distance ?? Int.max) {
                best = (candidate, distance)
            }
        }
        return best?.candidate
    }

    /// ` (did you mean X?)` when a near candidate exists, else the empty string.
    static func hint(for word: String, in candidates: [String]) -> String {
        nearest(to: word, in: candidates).map { " (did you mean \($0)?)" } ?? ""
    }

    /// Optimal-string-alignment distance: insertions, deletions, substitutions and transpositions
    /// of adjacent characters each cost one, so `clinet_id` is one edit from `client_id`.
    static func editDistance(_ lhs: String, _ rhs: String) -> Int {
        let a = Array(lhs.lowercased())
        let b = Array(rhs.lowercased())
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previousPrevious = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    value = min(value, previousPrevious[j - 2] + 1)
                }
                current[j] = value
            }
            (previousPrevious, previous, current) = (previous, current, previousPrevious)
        }
        return previous[b.count]
    }
}
