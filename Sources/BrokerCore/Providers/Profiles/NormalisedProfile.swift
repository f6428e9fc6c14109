/// A user's profile in the broker's own shape, whatever the provider: what `GET /profile` answers
/// next to the provider's `raw` object.
public struct NormalisedProfile: Sendable, Equatable {
    /// The provider's stable id for the user (`sub`). Numbers become their decimal text.
    public var subject: String
    /// A display name, when the provider gives one.
    public var name: String?
    /// An email address, when the provider gives one.
    public var email: String?
    /// Whether the provider vouches that `email` belongs to the user: `nil` when it does not say
    /// (and always `nil` without an email).
    public var emailVerified: Bool?
    /// A picture URL, when the provider gives one.
    public var picture: String?

    /// Creates a profile.
    public init(subject: String, name: String? = nil, email: String? = nil, emailVerified: Bool? = nil,
                picture: String? = nil) {
        self.subject = subject
        self.name = name
        self.email = email
        self.emailVerified = emailVerified
        self.picture = picture
    }
}
