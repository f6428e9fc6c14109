public import Foundation
#if canImport(WireValues)
public import WireValues
#endif

/// The claims of a verified ID token (OpenID Connect Core §2 and §5.1).
public struct IDTokenClaims: Sendable, Equatable {
    /// `sub`: the user's identifier at the issuer, stable and never reassigned.
    public var subject: String
    /// `iss`: the issuer, exactly as the token states it.
    public var issuer: String
    /// `aud`: the clients the token is for; a single string in the token becomes one element.
    public var audience: [String]
    /// `azp`: the client the token was issued to, when the token names one.
    public var authorizedParty: String?
    /// `exp`: when the token stops being acceptable.
    public var expiresAt: Date
    /// `iat`: when the token was issued, when the token says so.
    public var issuedAt: Date?
    /// `auth_time`: when the user authenticated, when the token says so.
    public var authTime: Date?
    /// `nonce`: the value sent with the authorization request, echoed back.
    public var nonce: String?
    /// `email`, as the provider states it.
    public var email: String?
    /// `email_verified`; the strings `"true"` and `"false"`, which some providers send, count too.
    public var emailVerified: Bool?
    /// `name`: the user's full name for display.
    public var name: String?
    /// `picture`: the URL of the user's profile picture.
    public var picture: String?
    /// Every claim of the token, including the ones above.
    public var raw: JSONValue

    /// Claims from their parts; `raw` should hold them all.
    public init(
        subject: String,
        issuer: String,
        audience: [String],
        authorizedParty: String? = nil,
        expiresAt: Date,
        issuedAt: Date? = nil,
        authTime: Date? = nil,
        nonce: String? = nil,
        email: String? = nil,
        emailVerified: Bool? = nil,
        name: String? = nil,
        picture: String? = nil,
        raw: JSONValue
    ) {
        self.subject = subject
        self.issuer = issuer
        self.audience = audience
        self.authorizedParty = authorizedParty
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        self.authTime = authTime
        self.nonce = nonce
        self.email = email
        self.emailVerified = emailVerified
        self.name = name
        self.picture = picture
        self.raw = raw
    }

    /// Reads the claims of a payload whose signature has been checked. `malformed` when the
    /// payload is not an object, a required claim (`iss`, `sub`, `aud`, `exp`) is missing, or
    /// a claim has the wrong type. Nothing here judges the values; `IDTokenVerifier` does.
    init(payload raw: JSONValue) throws(IDTokenError) {
        guard case .object = raw,
              let issuer = try raw.optionalString("iss"),
              let subject = try raw.optionalString("sub"), !subject.isEmpty,
              let audience = try raw.audience(),
              let expiresAt = try raw.optionalDate("exp")
        else { throw .malformed }
        self.init(
            subject: subject,
            issuer: issuer,
            audience: audience,
            authorizedParty: try raw.optionalString("azp"),
            expiresAt: expiresAt,
            issuedAt: try raw.optionalDate("iat"),
            authTime: try raw.optionalDate("auth_time"),
            nonce: try raw.optionalString("nonce"),
            email: try raw.optionalString("email"),
            emailVerified: try raw.optionalBool("email_verified"),
            name: try raw.optionalString("name"),
            picture: try raw.optionalString("picture"),
            raw: raw
        )
    }
}

extension JSONValue {
    /// The string claim `name`; nil when absent or null, `malformed` when another type.
    func optionalString(_ name: String) throws(IDTokenError) -> String? {
        switch self[name] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw .malformed
        }
    }

    /// The NumericDate claim `name` (RFC 7519 §2: seconds since the epoch, fractions allowed).
    func optionalDate(_ name: String) throws(IDTokenError) -> Date? {
        switch self[name] {
        case nil, .null?: return nil
        case .int(let seconds)?: return Date(timeIntervalSince1970: TimeInterval(seconds))
        case .double(let seconds)? where seconds.isFinite: return Date(timeIntervalSince1970: seconds)
        default: throw .malformed
        }
    }

    /// The boolean claim `name`, also read from the strings `"true"` and `"false"`.
    func optionalBool(_ name: String) throws(IDTokenError) -> Bool? {
        switch self[name] {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        case .string("true")?: return true
        case .string("false")?: return false
        default: throw .malformed
        }
    }

    /// `aud`: a string or an array of strings (RFC 7519 §4.1.3).
    func audience() throws(IDTokenError) -> [String]? {
        switch self["aud"] {
        case nil, .null?: return nil
        case .string(let single)?: return [single]
        case .array(let values)?:
            return try values.map { value throws(IDTokenError) in
                guard let text = value.stringValue else { throw .malformed }
                return text
            }
        default: throw .malformed
        }
    }
}
