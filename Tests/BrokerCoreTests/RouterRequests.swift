import Foundation
import HTTPServer
import Testing
import WireValues

@testable import BrokerCore

extension Router {
    /// The answer to `method target`, with a form body and a bearer token when given, as the
    /// server would send it: the request made in memory, routed, and its reply awaited.
    func answer(_ method: String, _ target: String, form: [(String, String)]? = nil, bearer: String? = nil,
                headers extra: [String: String] = [:]) async -> Response {
        var headers = extra
        if form != nil { headers["Content-Type"] = "application/x-www-form-urlencoded" }
        if let bearer { headers["Authorization"] = "Bearer \(bearer)" }
        let body = form.map { Array(FormFields.encode($0).utf8) } ?? []
        var request = Request(method: method, target: target, headers: headers, body: body)
        return await route(&request).reply.response()
    }
}

extension Response {
    /// The body as a JSON object.
    func jsonObject() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
    }
}
