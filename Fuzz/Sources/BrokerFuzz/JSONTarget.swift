// JSON bodies: WireValues.JSONValue.parse (Foundation's decoder under the broker's JSONValue).
//
// Invariants: whatever parses serializes (JSONValue.serialized, used for every JSON response)
// to JSON that parses back to the same value, numbers compared by value; JSONMemberCount (which
// finds a key written twice in a JSON body) counts no fewer members than an object decodes to,
// and exactly as many in the serialized form, where every key is written once.
@testable import WireValues

/// Equality that treats 1 and 1.0 as the same number: serialization may change a number's
/// representation, never its value.
func sameJSON(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.int(let x), .double(let y)), (.double(let y), .int(let x)): return Double(x) == y
    case (.double(let x), .double(let y)): return x == y || (x.isNaN && y.isNaN)
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { sameJSON($0, $1) }
    case (.object(let x), .object(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && sameJSON($0.1, $1.1) }
    default: return a == b
    }
}

/// True when the value holds a non-finite double, which JSON cannot carry (serialized as null).
func holdsNonFinite(_ value: JSONValue) -> Bool {
    switch value {
    case .double(let x): return !x.isFinite
    case .array(let values): return values.contains(where: holdsNonFinite)
    case .object(let members): return members.contains { holdsNonFinite($0.1) }
    default: return false
    }
}

let jsonTarget = FuzzTarget(name: "json", run: { bytes in
    guard let value = try? JSONValue.parse(bytes) else { return }
    let text = value.serialized()
    let again: JSONValue
    do {
        again = try JSONValue.parse(text)
    } catch {
        invariant(false, "serialized JSON does not parse: \(String(decoding: text, as: UTF8.self).prefix(200)) (\(error))")
        return
    }
    if case .object(let members) = value {
        invariant(JSONMemberCount.of(bytes) >= members.count, "JSONMemberCount counts fewer members than the object has")
        invariant(JSONMemberCount.of(text) == members.count, "JSONMemberCount miscounts a serialized object")
    }
    if !holdsNonFinite(value) {
        invariant(sameJSON(value, again), "JSON changes through serialize + parse: \(String(decoding: text, as: UTF8.self).prefix(200))")
    }
    _ = value["access_token"]?.stringValue
}, seeds: {
    textSeeds("json", [
        #"{"access_token":"at","token_type":"Bearer","expires_in":3600,"refresh_token":"rt","id_token":"a.b.c","scope":"openid profile"}"#,
        #"{"error":"invalid_grant","error_description":"The code has expired."}"#,
        #"{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"k1"}]}"#,
        #"{"sub":"248289761001","name":"Jane Doe","email":"janedoe@example.com","email_verified":true,"picture":null,"updated_at":1311280970.5}"#,
        #"[1, -0, 0.5, 1e308, -1e-308, 9223372036854775807, -9223372036854775808, 18446744073709551616]"#,
        #"{"s":"\u00e9\ud83d\udd11\n\t\"\\\/\u0000","nested":{"a":[[],{}],"b":false}}"#,
        #"{"dup":1,"dup":2}"#,
        #""just a string""#,
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        #"{"a":1e400,"b":-1e400}"#,
    ])
})
