public import WireValues

/// One place a profile field may come from. A field lists several, tried in order; the first
/// that yields a usable value wins.
public enum ProfileSource: Sendable, Equatable, ExpressibleByStringLiteral {
    /// A dot-separated JSON path into the provider's response, such as `name.display_name` or
    /// `images.0.url` (numeric segments index arrays). Missing and `null` values are skipped.
    case path(String)
    /// Text with `{path}` placeholders filled from the response, such as
    /// `https://cdn.discordapp.com/avatars/{id}/{avatar}.png`; skipped when any placeholder is
    /// missing or `null`.
    case template(String)
    /// A fixed value, such as `true` for `email_verified` when a provider only ever returns
    /// verified addresses.
    case constant(JSONValue)

    /// A path written as a string literal: `"avatar_url"`.
    public init(stringLiteral path: String) {
        self = .path(path)
    }

    /// The raw value this source finds in `raw`, if any.
    func value(in raw: JSONValue) -> JSONValue? {
        switch self {
        case .path(let path):
            return raw.profileValue(atPath: path)
        case .template(let template):
            return TemplateText.render(template) { raw.profileValue(atPath: $0)?.profileText }.map { .string($0) }
        case .constant(let value):
            return value
        }
    }
}
