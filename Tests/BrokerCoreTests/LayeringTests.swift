import Foundation
import Testing

/// Where HTTP stops (README, "How it is built"), checked on the source tree: the package graph
/// keeps `HTTPServer` from knowing the broker, but both live beside each other inside
/// `BrokerCore`, so this test is what keeps the layers under the handlers free of HTTP. A file
/// outside the folders that answer requests, or read finished ones, that imports `HTTPServer`
/// or names `HTTPError` fails it: report the outcome in a type of the layer, and turn it into
/// an answer in `API/`.
struct LayeringTests {
    /// The folders (and files) of `BrokerCore` that may speak HTTP: the handlers and what they
    /// share; the development provider's and the operations' own routes; metrics and logs, which
    /// read finished requests; the broker's assembly, which builds the server.
    static let edge = ["API/", "Development/", "Operations/", "Metrics/", "Logging/"]
    static let edgeFiles: Set = ["Broker.swift", "Config/ServerConfig+ServerConfiguration.swift"]

    /// Whether `path` (under `BrokerCore`) is on the HTTP edge.
    static func onTheEdge(_ path: String) -> Bool {
        edgeFiles.contains(path) || edge.contains { path.hasPrefix($0) }
    }

    /// An import of `HTTPServer`, whole or of one declaration (`import struct HTTPServer.Request`).
    static var httpImport: Regex<Substring> { #/import\s+(?:\w+\s+)?HTTPServer(?!\w)/# }
    /// A route added to a router by hand, not through a `RouteTable`.
    static var bareRoute: Regex<Substring> { #/[rR]outer\s*\.\s*(?:add|addPrefix)\s*\(|\.unmatched\s*=/# }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/BrokerCore")

    /// Every Swift file of `BrokerCore`, by its path under it.
    static func sources() throws -> [(path: String, text: String)] {
        let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
        var files: [(String, String)] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            let path = String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1))
            files.append((path, try String(contentsOf: url, encoding: .utf8)))
        }
        return files
    }

    @Test func onlyTheEdgeSpeaksHTTP() throws {
        let files = try Self.sources()
        #expect(files.count > 200, "the sources were found")
        #expect(files.contains { $0.path == "API/Routes/BrokerRoutes.swift" && $0.text.contains("import HTTPServer") },
                "a file of the edge that imports HTTPServer is seen")
        #expect(!Self.onTheEdge("BrokerClock.swift") && Self.onTheEdge("Broker.swift"))
        #expect("import struct HTTPServer.Request".contains(Self.httpImport) && !"import HTTPServerKit".contains(Self.httpImport))
        for (path, text) in files where !Self.onTheEdge(path) {
            let imports = text.contains(Self.httpImport), names = text.contains("HTTPError")
            #expect(!imports, "\(path) imports HTTPServer")
            #expect(!names, "\(path) names HTTPError")
        }
    }

    /// Every route the broker serves declares its policy (``RoutePolicy``): none is added to a
    /// router by hand, around the table.
    @Test func everyRouteGoesThroughARouteTable() throws {
        let files = try Self.sources()
        #expect("router.add(\"GET\", \"/x\")".contains(Self.bareRoute) && !"routes.add(\"GET\"".contains(Self.bareRoute))
        for (path, text) in files where path != "API/Routes/RouteTable.swift" {
            let bare = text.contains(Self.bareRoute)
            #expect(!bare, "\(path) adds a route to a router without a RouteTable")
        }
    }
}
