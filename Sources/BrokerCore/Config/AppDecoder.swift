import Yams

/// Decodes one entry of the `apps` section.
struct AppDecoder {
    let id: String
    let path: ConfigKeyPath
    /// The line of the app's id.
    let line: Int?
    /// Every provider id the file defines (even one that had problems of its own), so that a
    /// broken provider does not also make each app naming it fail.
    let providerIDs: [String]

    static let knownKeys = ["redirect_uris", "providers", "device_flow", "display_name", "dpop", "dpop_nonce"]

    /// The app, or `nil` when anything about it is wrong (every problem is recorded).
    func decode(_ node: Node, problems: inout ConfigProblemList) -> AppConfig? {
        let before = problems.problems.count
        guard let reader = YAMLMappingReader(node, at: path, known: Self.knownKeys, problems: &problems) else { return nil }
        let deviceFlow = reader.parsed("device_flow", expected: "true or false", problems: &problems,
                                       ConfigValueParsing.boolean) ?? false
        // A device-flow app needs no redirect URI: its devices poll instead (RFC 8628).
        let redirectURIs = deviceFlow && !reader.has("redirect_uris") ? [] : decodeRedirectURIs(reader, problems: &problems)
        let providers = decodeProviders(reader, problems: &problems)
        let displayName = reader.displayName(problems: &problems)
        let dpop = reader.parsed("dpop", expected: "optional or required", problems: &problems) {
            ConfigValueParsing.choice($0, as: AppDPoP.self)
        } ?? .optional
        let dpopNonce = reader.parsed("dpop_nonce", expected: "true or false", problems: &problems, ConfigValueParsing.boolean) ?? false
        guard problems.problems.count == before, let redirectURIs else { return nil }
        return AppConfig(id: id, redirectURIs: redirectURIs, providers: providers, deviceFlow: deviceFlow, displayName: displayName, dpop: dpop,
                         dpopNonce: dpopNonce)
    }

    private func decodeRedirectURIs(_ reader: YAMLMappingReader, problems: inout ConfigProblemList) -> [RedirectURI]? {
        guard reader.has("redirect_uris") else {
            problems.add(path.child("redirect_uris"), "required key is missing (an app with device_flow: true may leave it out)", line: line)
            return nil
        }
        guard let items = reader.stringList("redirect_uris", problems: &problems) else { return nil }
        guard !items.isEmpty else {
            problems.add(path.child("redirect_uris"), "must list at least one redirect URI",
                         line: reader.line(of: "redirect_uris"))
            return nil
        }
        var uris: [RedirectURI] = []
        var seen: [String: Int] = [:]
        for (index, item) in items.enumerated() {
            guard let uri = problems.check(RedirectURI.parse(item.text), at: item.path, line: item.line) else { continue }
            let matchKey = RedirectURI.loopbackKey(uri.raw) ?? uri.raw
            if let first = seen[matchKey] {
                let note = uri.kind == .loopback && uri.raw != items[first].text
                    ? " (loopback ports are ignored when matching)" : ""
                problems.add(item.path, "duplicate redirect URI \(ConfigValueParsing.quoted(uri.raw)): same as "
                    + "redirect_uris[\(first)]\(note)", line: item.line)
                continue
            }
            seen[matchKey] = index
            uris.append(uri)
        }
        return uris
    }

    private func decodeProviders(_ reader: YAMLMappingReader, problems: inout ConfigProblemList) -> [String]? {
        guard reader.has("providers") else { return nil }
        guard let items = reader.stringList("providers", problems: &problems) else { return nil }
        guard !items.isEmpty else {
            problems.add(path.child("providers"), "must list at least one provider (leave the key out to "
                + "allow every provider)", line: reader.line(of: "providers"))
            return nil
        }
        var providers: [String] = []
        for item in items {
            if !providerIDs.contains(item.text) {
                let hint = KeySuggestion.hint(for: item.text, in: providerIDs)
                problems.add(item.path, "unknown provider \(ConfigValueParsing.quoted(item.text))\(hint)", line: item.line)
            } else if providers.contains(item.text) {
                problems.add(item.path, "duplicate provider \(ConfigValueParsing.quoted(item.text))", line: item.line)
            } else {
                providers.append(item.text)
            }
        }
        return providers
    }
}
