// Query strings and application/x-www-form-urlencoded bodies: WireValues.FormFields, and the
// HTTP layer's FormFields.required and .optional.
//
// Invariants beyond "no crash": a parsed form re-encoded with FormFields.encode parses back to
// the same names and values (what the broker sends upstream is what it read).
import HTTPServer
import WireValues

let formTarget = FuzzTarget(name: "form", run: { bytes in
    let text = String(decoding: bytes, as: UTF8.self)
    guard let fields = try? FormFields(parsing: text) else { return }
    let pairs = fields.names.map { ($0, fields[$0]!) }
    let reparsed: FormFields
    do {
        reparsed = try FormFields(parsing: FormFields.encode(pairs))
    } catch {
        invariant(false, "an encoded form does not parse: \(error)")
        return
    }
    invariant(reparsed == fields, "a form does not survive encode + parse")
    for name in fields.names {
        _ = try? fields.required(name)
        _ = try? fields.optional(name)
    }
}, seeds: {
    textSeeds("form", [
        "response_type=code&client_id=demo&redirect_uri=http%3A%2F%2F127.0.0.1%3A9000%2Fcb&state=xyz&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256",
        "grant_type=authorization_code&code=SplxlOBeZQQYbYS6WxSbIA&code_verifier=dBjftJeZ4CVP-mJ92K9f-a7B8z1l3kQyY1gDg6r5cVw",
        "grant_type=refresh_token&refresh_token=tGzv3JOkF0XG5Qx2TlKWIA&scope=openid+profile",
        "code=abc&state=x%20y&iss=https%3A%2F%2Fidp.example.test",
        "error=access_denied&error_description=The+user+said+no%21&state=s",
        "a=1&a=2",
        "a=%zz",
        "a=%C3%A9t%C3%A9&b=&c",
        "=x&&b=%00",
        "name=%F0%9F%94%91+key&x=%E2%82",
        "access_token=at&token_type=bearer&expires_in=3600",
    ])
})
