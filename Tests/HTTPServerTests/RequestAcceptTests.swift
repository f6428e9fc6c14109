import Testing

@testable import HTTPServer

/// Choosing a page or JSON from `Accept` (RFC 9110 §12.5.1): by the media types named, without
/// case, by their `q`.
struct RequestAcceptTests {
    private func request(accept: String?) -> Request {
        Request(method: "GET", target: "/", headers: accept.map { ["Accept": $0] } ?? [:])
    }

    @Test func aBrowserWantsHTML() {
        let browser = request(accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
        #expect(browser.wantsHTML && !browser.wantsJSON)
    }

    @Test func mediaTypesCompareWithoutCase() {
        #expect(request(accept: "Text/HTML").wantsHTML)
        #expect(request(accept: "APPLICATION/JSON").wantsJSON)
    }

    @Test func wildcardsAndNoAcceptNameNeither() {
        for accept in [nil, "*/*", "text/*", "application/*"] {
            let client = request(accept: accept)
            #expect(!client.wantsHTML && !client.wantsJSON, "\(accept ?? "no Accept")")
        }
    }

    @Test func bothNamedGoesByQualityJSONWinningATie() {
        #expect(request(accept: "application/json, text/html").wantsJSON)
        #expect(!request(accept: "application/json, text/html").wantsHTML)
        #expect(request(accept: "text/html, application/json;q=0.5").wantsHTML)
        #expect(request(accept: "text/html;q=0.4, application/json;q=0.5").wantsJSON)
    }

    @Test func aQualityOfZeroRefuses() {
        #expect(!request(accept: "text/html;q=0").wantsHTML)
        #expect(request(accept: "application/json;q=0, text/html").wantsHTML)
        #expect(request(accept: "text/html; Q=0.0").acceptQuality(of: "text/html") == 0)
    }

    @Test func aMalformedQualityCountsAsNone() {
        #expect(request(accept: "text/html;q=2").acceptQuality(of: "text/html") == 1)
        #expect(request(accept: "text/html;q=x").acceptQuality(of: "text/html") == 1)
        #expect(request(accept: "text/htmlx").acceptQuality(of: "text/html") == nil)
    }
}
