import Testing
import WireValues

struct HeaderNameTests {
    @Test func namesCompareWithoutCaseAndOnlyLettersFold() {
        #expect(HeaderName.same(Array("Content-Length".utf8), Array("content-LENGTH".utf8)))
        #expect(!HeaderName.same(Array("X-A".utf8), Array("X\rA".utf8)), "- is not CR folded")
        #expect(!HeaderName.same(Array("A@".utf8), Array("a`".utf8)), "@ is not ` folded")
        #expect(!HeaderName.same(Array("Accept".utf8), Array("Accepts".utf8)))
    }
}
