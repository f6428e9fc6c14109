import Testing

@testable import WireValues

struct JSONValueTests {
    @Test func serializesInOrderWithEscapes() {
        let value = JSONValue.object([
            ("b", .string("quote \" backslash \\ newline \n tab \t <script>&")),
            ("a", .array([.int(-1), .bool(true), .null, .double(1.5)])),
            ("ctl", .string("\u{01}")),
        ])
        let text = String(decoding: value.serialized(), as: UTF8.self)
        #expect(text == #"{"b":"quote \" backslash \\ newline \n tab \t \u003cscript\u003e\u0026","a":[-1,true,null,1.5],"ctl":"\u0001"}"#)
    }

    @Test func roundTripsThroughParse() throws {
        let value = JSONValue.object([("a", .int(1)), ("b", .string("é")), ("c", .array([.bool(false)]))])
        #expect(try JSONValue.parse(value.serialized()) == value)
    }

    @Test func nonFiniteDoublesBecomeNull() {
        #expect(JSONValue.double(.infinity).serialized() == Array("null".utf8))
    }

    @Test func integersAppendInDecimal() {
        for value in [0, 7, 10, -1, 1_234_567_890, Int.max, Int.min] {
            var bytes: [UInt8] = []
            bytes.append(decimal: value)
            #expect(String(decoding: bytes, as: UTF8.self) == String(value))
        }
        func padded(_ value: Int, _ digits: Int) -> String {
            var bytes: [UInt8] = []
            bytes.append(decimal: value, minimumDigits: digits)
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(padded(7, 3) == "007")
        #expect(padded(0, 2) == "00")
        #expect(padded(12345, 4) == "12345")
        #expect(padded(-5, 3) == "-005")
        #expect(JSONValue.int(-42).serialized() == Array("-42".utf8))
    }
}
