import WireValues

// Presets for plain OAuth 2.0 providers: explicit endpoints and a provider-specific profile.

extension ProviderPreset {
    /// GitHub OAuth apps. GitHub has no RFC 7009 revocation endpoint and answers granted scopes
    /// comma-separated (`repo,gist`), accepting commas in requests too. `emailVerified` is
    /// `true`: `/user` shows only the user's public email, and GitHub lets only a verified
    /// address be made public.
    public static let github = ProviderPreset(
        name: "github",
        endpoints: .explicit(authorization: "https://github.com/login/oauth/authorize",
                             token: "https://github.com/login/oauth/access_token",
                             userinfo: "https://api.github.com/user"),
        defaultScopes: ["read:user", "user:email"], tokenEndpointAuthMethod: .clientSecretPost,
        profileMapping: ProfileMapping(subject: ["id"], name: ["name", "login"], email: ["email"],
                                       emailVerified: [.constant(.bool(true))], picture: ["avatar_url"]),
        scopeSeparator: ",", apiBaseURL: "https://api.github.com", apiHeaders: ["X-GitHub-Api-Version"],
        documentation: "https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps")

    /// Spotify. `emailVerified` is `false`: Spotify documents the address on `/v1/me` as
    /// unverified ("there is no proof that it actually belongs to the user").
    public static let spotify = ProviderPreset(
        name: "spotify",
        endpoints: .explicit(authorization: "https://accounts.spotify.com/authorize",
                             token: "https://accounts.spotify.com/api/token",
                             userinfo: "https://api.spotify.com/v1/me"),
        defaultScopes: ["user-read-email", "user-read-private"],
        profileMapping: ProfileMapping(subject: ["id"], name: ["display_name"], email: ["email"],
                                       emailVerified: [.constant(.bool(false))], picture: ["images.0.url"]),
        apiBaseURL: "https://api.spotify.com",
        documentation: "https://developer.spotify.com/documentation/web-api/tutorials/code-flow")

    /// Dropbox. `token_access_type=offline` asks for a refresh token. The profile call is
    /// `POST /2/users/get_current_account` with no body. Dropbox's token revocation
    /// (`/2/auth/token/revoke`) is not RFC 7009, so none is listed.
    public static let dropbox = ProviderPreset(
        name: "dropbox",
        endpoints: .explicit(authorization: "https://www.dropbox.com/oauth2/authorize",
                             token: "https://api.dropboxapi.com/oauth2/token",
                             userinfo: "https://api.dropboxapi.com/2/users/get_current_account"),
        defaultScopes: ["account_info.read"], authorizationParameters: ["token_access_type": "offline"],
        profileMapping: ProfileMapping(subject: ["account_id"], name: ["name.display_name"], email: ["email"],
                                       emailVerified: ["email_verified"], picture: ["profile_photo_url"]),
        userinfoMethod: "POST", apiBaseURL: "https://api.dropboxapi.com", apiHeaders: ["Dropbox-API-Select-User"],
        documentation: "https://www.dropbox.com/developers/documentation/http/documentation")

    /// Discord. `verified` is documented as "whether the email on this account has been
    /// verified"; the picture is built from the avatar hash on Discord's CDN.
    public static let discord = ProviderPreset(
        name: "discord",
        endpoints: .explicit(authorization: "https://discord.com/oauth2/authorize",
                             token: "https://discord.com/api/oauth2/token",
                             revocation: "https://discord.com/api/oauth2/token/revoke",
                             userinfo: "https://discord.com/api/v10/users/@me"),
        defaultScopes: ["identify", "email"],
        profileMapping: ProfileMapping(subject: ["id"], name: ["global_name", "username"], email: ["email"],
                                       emailVerified: ["verified"],
                                       picture: [.template("https://cdn.discordapp.com/avatars/{id}/{avatar}.png")]),
        apiBaseURL: "https://discord.com/api",
        documentation: "https://discord.com/developers/docs/topics/oauth2")

    /// Zoom. Scopes are chosen on the app in the Zoom Marketplace, so none are asked for by
    /// default. `emailVerified` stays unknown: Zoom's `verified` flag says whether the *user*
    /// is verified, not the address.
    public static let zoom = ProviderPreset(
        name: "zoom",
        endpoints: .explicit(authorization: "https://zoom.us/oauth/authorize", token: "https://zoom.us/oauth/token",
                             revocation: "https://zoom.us/oauth/revoke", userinfo: "https://api.zoom.us/v2/users/me"),
        defaultScopes: [],
        profileMapping: ProfileMapping(subject: ["id"], name: ["display_name", .template("{first_name} {last_name}")],
                                       email: ["email"], picture: ["pic_url"]),
        apiBaseURL: "https://api.zoom.us/v2",
        documentation: "https://developers.zoom.us/docs/integrations/oauth/")
}
