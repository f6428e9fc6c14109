/// Scope lists by their text: a broker's sessions have a handful of scope sets, and one array
/// for each keeps the copies out of every session's memory (and, on `GET /token`, its cache
/// misses). State files are decoded through one per decoding thread (which also saves a split
/// per session), and the session store passes what it is given through one.
struct ScopeTable {
    private var lists: [String: [String]] = [:]

    /// The table's list for the space-separated `text`, split and kept if new.
    mutating func list(_ text: String) -> [String] {
        lists[text] ?? keep(text.split(separator: " ").map(String.init), as: text)
    }

    /// The table's list equal to `scopes`, which is kept if new.
    mutating func shared(_ scopes: [String]) -> [String] {
        let text = scopes.joined(separator: " ")
        return lists[text] ?? keep(scopes, as: text)
    }

    private mutating func keep(_ list: [String], as text: String) -> [String] {
        if lists.count == 1024 { lists.removeAll(keepingCapacity: true) } // unusually many sets: start over
        lists[text] = list
        return list
    }
}
