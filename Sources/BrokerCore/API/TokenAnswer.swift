import HTTPServer
import WireValues

extension Session {
    /// The token answer (`POST /token`, `GET /token`, `POST /refresh`):
    /// `{[session_token,] access_token, token_type, expires_in, scope, provider}`, written
    /// straight to bytes — `GET /token` is the hot path.
    func tokenAnswer(at now: Double, sessionToken: String? = nil) -> Response {
        var body: [UInt8] = []
        body.reserveCapacity(160 + accessToken.utf8.count)
        body.append(UInt8(ascii: "{"))
        if let sessionToken {
            body.append(literal: #""session_token":"#)
            JSONValue.appendString(sessionToken, to: &body)
            body.append(UInt8(ascii: ","))
        }
        body.append(literal: #""access_token":"#)
        JSONValue.appendString(accessToken, to: &body)
        body.append(literal: #","token_type":"Bearer","expires_in":"#)
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
