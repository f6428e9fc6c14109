import Testing

@testable import BrokerCore

/// A record's text fields read back as written, in ASCII or not (a list of words as the text of
/// its words joined); bytes that are not UTF-8 are a decoding error, never text repaired with
/// U+FFFD.
struct FieldReaderTests {
    @Test(arguments: ["tbs_0123456789", "", "Zoë Ångström", "名前 🙂"])
    func textReadsBackAsWritten(_ text: String) throws {
        var writer = FieldWriter()
        writer.string(3, text)
        #expect(try FieldReader(writer.bytes[...]).string(3) == text)
    }

    @Test(arguments: [[], ["openid"], ["openid", "profile", "offline_access"], ["écrire", "lire"]])
    func wordsAreWrittenAsTheirJoinedText(_ words: [String]) throws {
        var joined = FieldWriter(), text = FieldWriter()
        joined.joined(3, words)
        text.string(3, words.joined(separator: " "))
        #expect(joined.bytes == text.bytes)
        #expect(try FieldReader(joined.bytes[...]).string(3) == words.joined(separator: " "))
    }

    @Test(arguments: [[0xFF], [0x61, 0xC3], [0xC0, 0xAE], [0xED, 0xA0, 0x80]] as [[UInt8]])
    func bytesThatAreNotUTF8AreAnError(_ bytes: [UInt8]) throws {
        var writer = FieldWriter()
        writer.bytes(3, bytes)
        let reader = try FieldReader(writer.bytes[...])
        #expect(throws: StateDecodingError.self) { try reader.string(3) }
    }
}
