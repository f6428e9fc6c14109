import Testing

@testable import HTTPServer

struct RequestIDsTests {
    @Test func acceptsPlainClientIDs() {
        let ids = RequestIDs()
        #expect(ids.make(clientSupplied: "abc-123_X.y") == "abc-123_X.y")
    }

    @Test(arguments: ["", "has space", "semi;colon", String(repeating: "a", count: 65), "line\nbreak"])
    func replacesUnsafeClientIDs(_ unsafe: String) {
        let made = RequestIDs().make(clientSupplied: unsafe)
        #expect(made != unsafe)
        #expect(RequestIDs.isAcceptable(made))
    }

    @Test func generatedIDsAreUniqueAndShort() throws {
        let ids = RequestIDs()
        let made = (0..<1000).map { _ in ids.make(clientSupplied: nil) }
        #expect(Set(made).count == 1000)
        let prefix = try #require(made.first?.split(separator: "-").first)
        #expect(made[0] == "\(prefix)-1")
        #expect(made[15] == "\(prefix)-10")
        #expect(made[999] == "\(prefix)-3e8")
        #expect(made.allSatisfy { RequestIDs.isAcceptable($0) && $0.utf8.count <= 12 })
    }
}
