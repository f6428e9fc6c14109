public import WireValues

/// How a provider's userinfo/profile response maps onto the broker's ``NormalisedProfile``.
///
/// Each field lists its ``ProfileSource``s in order; the first that yields a usable value wins
/// (text for `subject`, `name`, `email` and `picture`; a flag for `emailVerified`).
public struct ProfileMapping: Sendable, Equatable {
    /// Where the stable user id comes from. A response without one maps to no profile.
    public var subject: [ProfileSource]
    /// Where the display name comes from.
    public var name: [ProfileSource]
    /// Where the email address comes from.
    public var email: [ProfileSource]
    /// Where "the provider vouches for the email" comes from; empty when the provider never says.
    public var emailVerified: [ProfileSource]
    /// Where the picture URL comes from.
    public var picture: [ProfileSource]

    /// Creates a mapping.
    public init(subject: [ProfileSource], name: [ProfileSource] = [], email: [ProfileSource] = [],
                emailVerified: [ProfileSource] = [], picture: [ProfileSource] = []) {
        self.subject = subject
        self.name = name
        self.email = email
        self.emailVerified = emailVerified
        self.picture = picture
    }

    /// The standard claims of OpenID Connect Core §5.1: `sub`, `name` (else
    /// `preferred_username`), `email`, `email_verified` (a boolean, or the string
    /// `"true"`/`"false"` that some providers send) and `picture`.
    public static let openIDConnect = ProfileMapping(
        subject: ["sub"],
        name: ["name", "preferred_username"],
        email: ["email"],
        emailVerified: ["email_verified"],
        picture: ["picture"]
    )

    /// The normalised profile in `raw`; `nil` when no subject can be found. `emailVerified` is
    /// `nil` whenever there is no email: verification is a statement about an address.
    public func profile(from raw: JSONValue) -> NormalisedProfile? {
        guard let subject = Self.text(subject, in: raw) else { return nil }
        let email = Self.text(email, in: raw)
        return NormalisedProfile(
            subject: subject,
            name: Self.text(name, in: raw),
            email: email,
            emailVerified: email == nil ? nil : emailVerified.lazy.compactMap { $0.value(in: raw)?.profileFlag }.first,
            picture: Self.text(picture, in: raw)
        )
    }

    private static func text(_ sources: [ProfileSource], in raw: JSONValue) -> String? {
        sources.lazy.compactMap { $0.value(in: raw)?.profileText }.first
    }
}
