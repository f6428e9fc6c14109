import HTTPServer
import WireValues

extension Session {
    /// The token answer (`POST /token`, `GET /token`, `POST /refresh`):
    /// `{[session_token, session_token_type,] access_token, token_type, expires_in, scope,
    /// provider}`, written straight to bytes — `GET /token` is the hot path. A provider token
    /// bound to the broker's key (DPoP) is of no use to the app: the answer leaves it out and says
    /// `token_type: DPoP` (`GET /token` refuses such a session: ``HTTPError/providerTokenBound(provider:proxied:)``).
    func tokenAnswer(at now: Double, sessionToken: String? = nil) -> Response {
        var body: [UInt8] = []
        body.reserveCapacity(160 + accessToken.utf8.count)
        body.append(UInt8(ascii: "{"))
        if let sessionToken {
            body.append(literal: #""session_token":"#)
            JSONValue.appendString(sessionToken, to: &body)
            body.append(literal: keyThumbprint == nil ? #","session_token_type":"Bearer","# : #","session_token_type":"DPoP","#)
        }
        if providerProofKey == nil {
            body.append(literal: #""access_token":"#)
            JSONValue.appendString(accessToken, to: &body)
            body.append(literal: #","token_type":"Bearer","expires_in":"#)
        } else {
            body.append(literal: #""token_type":"DPoP","expires_in":"#)
        }
        if let expiresIn = expiresIn(at: now) {
            body.append(decimal: expiresIn)
        } else {
            body.append(literal: "null")
        }
        body.append(literal: #","scope":"#)
        JSONValue.appendString(joining: scopes, separator: " ", to: &body)
        body.append(literal: #","provider":"#)
        JSONValue.appendString(provider, to: &body)
        body.append(UInt8(ascii: "}"))
        return .json(serialized: body)
    }
}

extension Session {
    /// RFC 6749 §5.1's answer at the standard token endpoint: the provider's access token, and
    /// the broker session token as the refresh token (when the app is to get it). For a session
    /// bound to a key (DPoP), the session token is the access token as well (`token_type: DPoP`,
    /// RFC 9449 §5), good at the broker until `sessionEnd`: the provider's token, which is no
    /// bound token, stays in the broker, and the app calls its API through `/proxy`. So too,
    /// as a bearer token, when the provider bound its own token to the broker's key.
    func standardTokenAnswer(at now: Double, refreshToken: String?, sessionEnd: Double) throws(HTTPError) -> Response {
        if keyThumbprint != nil || providerProofKey != nil {
            guard let refreshToken else {
                throw .badRequest("The code added scopes to a session bound to a key: keep using its token.", code: "invalid_grant")
            }
            return .json(.object([
                ("access_token", .string(refreshToken)), ("token_type", .string(keyThumbprint == nil ? "Bearer" : "DPoP")),
                ("expires_in", .int(max(0, Int(sessionEnd - now)))), ("scope", .string(scopes.joined(separator: " "))),
                ("refresh_token", .string(refreshToken)),
            ]), headers: [HTTPHeader("Pragma", "no-cache")])
        }
        var members: [(String, JSONValue)] = [("access_token", .string(accessToken)), ("token_type", .string("Bearer"))]
        if let expiresIn = expiresIn(at: now) { members.append(("expires_in", .int(expiresIn))) }
        members.append(("scope", .string(scopes.joined(separator: " "))))
        if let refreshToken { members.append(("refresh_token", .string(refreshToken))) }
        return .json(.object(members), headers: [HTTPHeader("Pragma", "no-cache")])
    }
}
