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
    static let edge = ["API/", "Development/", "Operations/", "Metrics/", "Logging/", "Broker.swift",
                       "Config/ServerConfig+ServerConfiguration.swift"]

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
        for (path, text) in files where !Self.edge.contains(where: { path.hasPrefix($0) }) {
            let imports = text.contains("import HTTPServer"), names = text.contains("HTTPError")
            #expect(!imports, "\(path) imports HTTPServer")
            #expect(!names, "\(path) names HTTPError")
        }
    }
}
