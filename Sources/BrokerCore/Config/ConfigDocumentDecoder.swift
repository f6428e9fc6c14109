import Yams

/// Walks the YAML document, filling a draft and recording every problem on the way.
struct ConfigDocumentDecoder {
    /// The environment, for secret references.
    let environment: [String: String]
    /// Where relative secret-file paths are resolved from.
    let baseDirectory: String?

    /// The keys allowed at the top of the document.
    static let topLevelKeys = ["server", "log", "sessions", "state", "webhooks", "admin", "resource_servers", "providers", "apps"]

    /// Decodes the whole document into `draft`.
    func decode(_ root: Node, into draft: inout ConfigDraft, problems: inout ConfigProblemList) {
        guard let reader = YAMLMappingReader(root, at: .root, known: Self.topLevelKeys, problems: &problems) else { return }
        for section in ["server", "log", "sessions", "admin"] {
            if let node = reader.node(section) {
                decodeSettings(node, at: ConfigKeyPath.root.child(section), into: &draft, problems: &problems)
            }
        }
        if let node = reader.node("state"),
           let state = decodeSettings(node, at: ConfigKeyPath.root.child("state"),
                                      handledElsewhere: StateKeyReference.configKeys + ["postgres"], into: &draft, problems: &problems) {
            decodeStateKeyReference(state, into: &draft, problems: &problems)
            if let node = state.node("postgres"),
               let postgres = decodeSettings(node, at: state.path.child("postgres"),
                                             handledElsewhere: ["password_env", "password_file"], into: &draft, problems: &problems) {
                decodePostgresPassword(postgres, into: &draft, problems: &problems)
            }
        }
        if let node = reader.node("webhooks"),
           let webhooks = decodeSettings(node, at: ConfigKeyPath.root.child("webhooks"),
                                         handledElsewhere: ["secret_env", "secret_file"], into: &draft, problems: &problems) {
            decodeWebhookSecret(webhooks, into: &draft, problems: &problems)
        }
        if let node = reader.node("resource_servers") {
            decodeResourceServers(node, into: &draft, problems: &problems)
        }
        var providerIDs: [String] = []
        if let node = reader.node("providers"),
           let providers = YAMLMappingReader(node, at: ConfigKeyPath.root.child("providers"), known: nil, problems: &problems) {
            for id in providers.keys {
                let path = providers.path.child(id)
                let line = providers.line(of: id)
                guard problems.check(ConfigIdentifier.validate(id), at: path, line: line) != nil,
                      let value = providers.node(id) else { continue }
                providerIDs.append(id)
                if let provider = ProviderDecoder(id: id, path: path, line: line, environment: environment,
                                                  baseDirectory: baseDirectory).decode(value, problems: &problems) {
                    draft.providers.append(provider)
                }
            }
        }
        if let node = reader.node("apps"),
           let apps = YAMLMappingReader(node, at: ConfigKeyPath.root.child("apps"), known: nil, problems: &problems) {
            for id in apps.keys {
                let path = apps.path.child(id)
                let line = apps.line(of: id)
                guard problems.check(ConfigIdentifier.validate(id), at: path, line: line) != nil,
                      let value = apps.node(id) else { continue }
                if let app = AppDecoder(id: id, path: path, line: line, providerIDs: providerIDs)
                    .decode(value, problems: &problems) {
                    draft.apps.append(app)
                }
            }
        }
    }

    /// Decodes a section made of ``ConfigSetting``s (and nested sections of them), such as
    /// `server` or `log`. Its known keys come from the settings table, plus `handledElsewhere`:
    /// keys that are allowed here but left to the caller, which reads them from the answered
    /// mapping (`nil` when the section is not a mapping).
    @discardableResult
    func decodeSettings(_ node: Node, at path: ConfigKeyPath, handledElsewhere: [String] = [],
                        into draft: inout ConfigDraft, problems: inout ConfigProblemList) -> YAMLMappingReader? {
        let prefix = path.description + "."
        var children: [String] = []
        for setting in ConfigSetting.all where setting.key.hasPrefix(prefix) {
            let name = String(setting.key.dropFirst(prefix.count).prefix { $0 != "." })
            if !children.contains(name) { children.append(name) }
        }
        guard let reader = YAMLMappingReader(node, at: path, known: children + handledElsewhere,
                                             problems: &problems) else { return nil }
        for key in reader.keys where !handledElsewhere.contains(key) {
            let childPath = path.child(key)
            guard let setting = ConfigSetting.named(childPath.description) else {
                if let child = reader.node(key) {
                    decodeSettings(child, at: childPath, into: &draft, problems: &problems)
                }
                continue
            }
            guard let text = reader.scalar(key, expected: setting.expected, problems: &problems) else { continue }
            let line = reader.node(key)?.lineNumber
            switch setting.apply(&draft, text) {
            case .success: draft.lines[setting.key] = line
            case .failure(let invalid): problems.add(childPath, invalid, line: line)
            }
        }
        return reader
    }
}
