import Testing
import WireValues

@testable import HTTPServer

struct RouterTests {
    private func router() -> Router {
        var router = Router()
        router.add("GET", "/token") { _ in .now(.json(.object([("route", .string("get-token"))]))) }
        router.add("POST", "/token") { _ in .now(.json(.object([("route", .string("post-token"))]))) }
        router.add("GET", "/fails") { _ throws(HTTPError) in throw .badRequest("No.") }
        return router
    }

    private func response(_ reply: Reply) -> Response? {
        if case .now(let response) = reply { return response }
        return nil
    }

    @Test func routesByMethodAndPath() throws {
        let get = try #require(response(router().route(Request(method: "GET", target: "/token?min_ttl=5")).reply))
        #expect(get.status == 200)
        #expect(get.body == Array(#"{"route":"get-token"}"#.utf8))
        let post = try #require(response(router().route(Request(method: "POST", target: "/token")).reply))
        #expect(post.body == Array(#"{"route":"post-token"}"#.utf8))
    }

    @Test func headUsesGet() throws {
        let head = try #require(response(router().route(Request(method: "HEAD", target: "/token")).reply))
        #expect(head.status == 200)
    }

    @Test func unknownPathIs404() throws {
        let missing = try #require(response(router().route(Request(method: "GET", target: "/nope/secret-looking")).reply))
        #expect(missing.status == 404)
        #expect(missing.body == Array(#"{"error":"not_found","error_description":"There is no endpoint at this path."}"#.utf8))
    }

    @Test func wrongMethodIs405WithAllow() throws {
        let wrong = try #require(response(router().route(Request(method: "DELETE", target: "/token")).reply))
        #expect(wrong.status == 405)
        #expect(wrong.header("Allow") == "GET, HEAD, POST")
        let json = try JSONValue.parse(wrong.body)
        #expect(json["error"] == .string("method_not_allowed"))
        let invented = try #require(response(router().route(Request(method: "ZQXMARK", target: "/token")).reply))
        #expect(invented.status == 405)
        #expect(!String(decoding: invented.body, as: UTF8.self).contains("ZQXMARK"), "the method is not echoed")
    }

    /// A route that registers HEAD itself (the API proxy does) names it once.
    @Test func anAllowHeaderNamesEachMethodOnce() throws {
        var router = Router()
        for method in ["GET", "HEAD", "POST"] { router.add(method, "/proxy") { _ in .now(.json(.object([]))) } }
        let wrong = try #require(response(router.route(Request(method: "OPTIONS", target: "/proxy")).reply))
        #expect(wrong.status == 405)
        #expect(wrong.header("Allow") == "GET, HEAD, POST")
        #expect(try JSONValue.parse(wrong.body)["error_description"] == .string("This method is not allowed here; use GET or HEAD or POST."))
    }

    @Test func thrownErrorsBecomeResponses() throws {
        let failed = try #require(response(router().route(Request(method: "GET", target: "/fails")).reply))
        #expect(failed.status == 400)
        #expect(failed.header("Content-Type") == "application/json")
        #expect(try JSONValue.parse(failed.body)["error_description"] == .string("No."))
    }

    @Test func routeLabelsDoNotExplode() {
        #expect(router().route(Request(method: "GET", target: "/token?min_ttl=5")).label == "/token")
        #expect(router().route(Request(method: "PUT", target: "/token")).label == "/token")
        #expect(router().route(Request(method: "GET", target: "/random/\(Int.random(in: 0...1000))")).label == "unmatched")
        #expect(router().label(for: "/token") == "/token")
        #expect(router().label(for: "/random") == "unmatched")
    }

    @Test func listsRoutes() {
        #expect(router().routes.map { "\($0.method) \($0.path)" } == ["GET /fails", "GET /token", "POST /token"])
    }

    @Test func deferredCatchingMapsErrors() async {
        let reply = Reply.deferredCatching { () async throws(HTTPError) -> Response in throw .badRequest("Late failure.") }
        guard case .later = reply else {
            Issue.record("expected a deferred reply")
            return
        }
        #expect(await reply.response().status == 400)
    }
}

struct ResponseTests {
    @Test func headerLookupIgnoresCase() {
        let response = Response(status: 200, headers: [HTTPHeader("Cache-Control", "max-age=5"), HTTPHeader("X-A", "1")])
        #expect(response.header("cache-control") == "max-age=5")
        #expect(response.header("CACHE-CONTROL") == "max-age=5")
        #expect(response.header("Cache-Contro") == nil)
        #expect(response.header("x-b") == nil)
    }
}
