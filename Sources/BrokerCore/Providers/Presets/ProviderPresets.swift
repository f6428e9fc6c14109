extension ProviderPreset {
    /// Every preset, by name.
    public static let all: [ProviderPreset] = [
        .auth0, .discord, .dropbox, .github, .gitlab, .google, .keycloak, .linkedin, .microsoft,
        .oidc, .okta, .salesforce, .slack, .spotify, .twitch, .zoom,
    ]

    /// The preset called `name` (exact match), if there is one.
    public static func named(_ name: String) -> ProviderPreset? {
        all.first { $0.name == name }
    }

    /// The names of every preset, sorted.
    public static var names: [String] { all.map(\.name) }

    /// The configuration keys that fill placeholders in some preset (`tenant`).
    static var placeholderKeys: [String] {
        var keys: [String] = []
        for placeholder in all.flatMap(\.placeholders) where !keys.contains(placeholder.name) {
            keys.append(placeholder.name)
        }
        return keys
    }
}
