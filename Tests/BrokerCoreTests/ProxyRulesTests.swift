import Foundation
import Testing

@testable import APIClient
@testable import BrokerCore

/// The API proxy's rules without a network: which targets are built and which refused, which
/// headers cross, and which addresses the client refuses to connect to.
struct ProxyRulesTests {
    private func target(_ path: String, _ query: String? = nil) -> Result<String, ProxyPath.Refusal> {
        ProxyPath.target(base: "https://api.example.com/v4/", path: Substring(path), query: query.map { Substring($0) })
    }

    @Test func aPathIsJoinedToTheBaseAsSent() throws {
        #expect(try target("/users/42/repos", "page=2&q=a%20b").get() == "https://api.example.com/v4/users/42/repos?page=2&q=a%20b")
        #expect(try target("").get() == "https://api.example.com/v4/")
        #expect(try target("/files/a%20b:c;d=e,f~g").get() == "https://api.example.com/v4/files/a%20b:c;d=e,f~g")
        #expect(try target("/search", "q=user@example.com&x=/?").get().hasSuffix("?q=user@example.com&x=/?"))
    }

    @Test(arguments: [
        "relative", "/..", "/a/../b", "/./a", "/a/.", "/a//b", "/%2e%2e/x", "/%2E/x", "/a%2fb", "/a%2Fb", "/a%5Cb", "/a\\b",
        "/user@host", "/a%40b", "/a%25b", "/a%00", "/a%0A", "/a%7f", "/a%zz", "/a%2", "/a b", "/a\u{7f}", "/caf\u{e9}", "/a#b",
    ])
    func everyPathTrickIsRefused(_ path: String) {
        guard case .failure = target(path) else {
            Issue.record("\(path) was accepted")
            return
        }
    }

    @Test(arguments: [
        "/..;/admin", "/.;/x", "/a/..;jsessionid=1/b", "/...;x", "/;x", "/..%3b/x", "/..%3B", "/%c0%ae%c0%ae/x", "/%c0%2e", "/%e0%80%ae",
        "/%ef%bc%8e%ef%bc%8e/x", "/a/%ef%bc%8e", "/%e2%80%a4%e2%80%a4", "/%ef%b9%92", "/%e3%80%82", "/%e2%80%a5", "/%ef%bc%8f",
        "/%ef%bc%bc", "/%ef%bc%a0", "/%ef%bc%9b", "/%ff", "/%c3", "/a%e2%80", "/%80", "/%ed%a0%80",
        // A combining mark after the `;` (one Character with it, not a `;`): still `..` to such a server.
        "/a/..;%CC%81/admin", "/..%3b%cc%81/x",
    ])
    func whatSomeServersReadAsADotSegmentIsRefused(_ path: String) {
        guard case .failure = target(path) else {
            Issue.record("\(path) was accepted")
            return
        }
    }

    @Test func encodedUTF8AndPathParametersPass() throws {
        for path in ["/caf%c3%a9", "/caf%C3%A9/x", "/a;b=c", "/a..;b", "/v1.2;x/y", "/%e2%82%ac", "/%f0%9f%98%80"] {
            #expect(try target(path).get() == "https://api.example.com/v4" + path)
        }
    }

    @Test func aQueryMayHoldAnyVisibleCharacterButAHash() {
        #expect((try? target("/a", "x=%2F..%2F&y=\\").get()) != nil)
        for query in ["a=b#c", "a=b c", "a=\u{1}", "a=\u{e9}"] {
            guard case .failure = target("/a", query) else {
                Issue.record("query \(query) was accepted")
                continue
            }
        }
    }

    @Test func headersCrossOnlyWhenAllowed() {
        for name in ["Authorization", "Cookie", "Host", "Connection", "Proxy-Authorization", "X-Forwarded-For", "Forwarded", "Transfer-Encoding"] {
            #expect(ProxyHeaders.refusal(ofExtra: name) != nil, "\(name) may not be an api_headers entry")
        }
        #expect(ProxyHeaders.refusal(ofExtra: "X-GitHub-Api-Version") == nil)
        #expect(ProxyHeaders.refusal(ofExtra: "Bad Name") != nil)
        for name in ["Content-Type", "ETag", "Link", "Location", "X-RateLimit-Remaining", "RateLimit-Policy", "Retry-After"] {
            #expect(ProxyHeaders.passesBack(name), "\(name) goes back")
        }
        for name in ["Set-Cookie", "Connection", "Transfer-Encoding", "Server", "X-Internal", "Strict-Transport-Security"] {
            #expect(!ProxyHeaders.passesBack(name), "\(name) stays behind")
        }
        #expect(!ProxyHeaders.isPlainValue("a\r\nb") && ProxyHeaders.isPlainValue("W/\"x\"\tok"))
    }

    /// RFC 9110 §7.6.1: the names a Connection header lists, in any case, spaced or not.
    @Test func aConnectionHeaderListsItsHopByHopHeaders() {
        #expect(ProxyHeaders.isListed("Accept", in: "keep-alive, accept ,If-Match"))
        #expect(ProxyHeaders.isListed("If-Match", in: "keep-alive, accept ,If-Match"))
        #expect(!ProxyHeaders.isListed("If-Match", in: "keep-alive, If-Match-Not"))
        #expect(!ProxyHeaders.isListed("Accept", in: nil) && !ProxyHeaders.isListed("Accept", in: ""))
        #expect(ProxyHeaders.value(of: "connection", in: [("ETag", "x"), ("CONNECTION", "Link")]) == "Link")
        #expect(ProxyHeaders.joinedValue(of: "Connection", in: [("Connection", "keep-alive"), ("ETag", "x"), ("connection", "Link")])
                == "keep-alive, Link", "a list given in two fields")
        #expect(ProxyHeaders.value(of: "X-A", in: [("X\rA", "no"), ("x-a", "yes")]) == "yes", "only letters fold")
    }

    @Test func internalAddressesAreRefused() {
        for address in ["127.0.0.1", "127.1.2.3", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254",
                        "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00:ec2::254",
                        "fc00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.1.2.3", "64:ff9b::a9fe:a9fe", "2002:7f00:1::",
                        "64:ff9b:1::a00:1", "64:ff9b:1:ffff::808:808", "::ffff:0:127.0.0.1", "0:0:0:0:ffff:0:a9fe:a9fe", "::ffff:0:a00:1",
                        "fec0::1", "feff::1", "192.0.2.1", "198.51.100.7", "203.0.113.255", "2001:db8::1", "2001:db8:ffff::1",
                        "::ffff:192.0.2.1"] {
            #expect(APIExchange.refuses(address: address) == true, "\(address) must be refused")
        }
        for address in ["8.8.8.8", "140.82.112.6", "172.32.0.1", "192.169.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "::ffff:0:8.8.8.8",
                        "192.0.3.1", "198.51.101.1", "203.0.114.1", "2001:db9::1", "64:ff9b:2::1"] {
            #expect(APIExchange.refuses(address: address) == false, "\(address) is public")
        }
        #expect(APIExchange.refuses(address: "example.com") == nil)
    }

    @Test func anAnswersHeaderLinesAreReadAsTheyCame() {
        let text = "Content-Type: application/json\r\nX-Empty:\r\nLink:\t<https://a/b?c=d:e>; rel=\"next\" \r\nno colon here\r\nETag:\"v1\"\r\n"
        let headers = Array(text.utf8).withUnsafeBytes { APIExchange.headers($0) }
        #expect(headers.map { "\($0.name)=\($0.value)" } == [
            "Content-Type=application/json", "X-Empty=", #"Link=<https://a/b?c=d:e>; rel="next""#, #"ETag="v1""#,
        ])
        // Lines ended by a bare LF, as libcurl splits them too.
        let bare = Array("A: 1\nB: 2\n".utf8).withUnsafeBytes { APIExchange.headers($0) }
        #expect(bare.map { "\($0.name)=\($0.value)" } == ["A=1", "B=2"])
        // Blanks before a colon (which a proxy removes, RFC 9112 §5.1), a colon in the value, and
        // a last line without its end.
        let edges = Array("Name \t: a:b\r\nC:\r\n:no name\r\nLast: x".utf8).withUnsafeBytes { APIExchange.headers($0) }
        #expect(edges.map { "\($0.name)=\($0.value)" } == ["Name=a:b", "C=", "=no name", "Last=x"])
        #expect(APIExchange.headers(UnsafeRawBufferPointer(start: nil, count: 0)).isEmpty)
    }

    @Test func anOptionLibcurlRefusesFailsTheCall() async throws {
        // libcurl refuses a URL over 8 MB (CURL_MAX_INPUT_LENGTH): unchecked, the call would go on
        // without it, as it would without any other refused option.
        let request = APIRequest(method: "GET", url: "http://127.0.0.1:9/" + String(repeating: "a", count: 9_000_000), headers: [],
                                 body: nil, timeoutSeconds: 2, maxResponseBytes: 1_024, allowPrivateAddresses: false, allowHTTP: true,
                                 connectionKey: "test", authorities: .system)
        let transfers = try #require(APITransfers(maxInFlight: 1))
        guard case .failure(.failed(let reason)) = await transfers.perform(request) else {
            Issue.record("the call did not fail")
            return
        }
        #expect(reason == "libcurl refused an option of the call")
    }

    @Test func aConnectionKeyTooLongToKeepWholeFailsTheCall() async throws {
        // Cut short, it could match another key and share its connections.
        let request = APIRequest(method: "GET", url: "http://127.0.0.1:9/", headers: [], body: nil, timeoutSeconds: 2,
                                 maxResponseBytes: 1_024, allowPrivateAddresses: false, allowHTTP: true,
                                 connectionKey: String(repeating: "k", count: 91), authorities: .system)
        let transfers = try #require(APITransfers(maxInFlight: 1))
        guard case .failure(.failed(let reason)) = await transfers.perform(request) else {
            Issue.record("the call did not fail")
            return
        }
        #expect(reason.contains("a key over 90 bytes"))
    }
}

/// The proxy's configuration: presets bring their API, a provider may set or override it, and
/// what it may not set is a problem.
struct ConfigAPIProxyTests {
    private let app = "apps:\n  a:\n    redirect_uris: [http://127.0.0.1/cb]\n"

    @Test func presetsBringTheirAPIAndAProviderMaySetItsOwn() throws {
        let config = try loadConfig("providers:\n  gh:\n    preset: github\n    client_id: c\n    client_secret_env: S\n"
            + "  corp:\n    issuer: https://login.example.com\n    client_id: c\n    client_secret_env: S\n"
            + "    api_base_url: https://api.example.com/v1\n    api_headers: [X-Api-Version]\n    api_allow_private_addresses: true\n"
            + "  plain:\n    issuer: https://login.example.com\n    client_id: c\n    client_secret_env: S\n" + app, env: ["S": "s"])
        let github = try #require(config.provider(id: "gh"))
        #expect(github.apiBaseURL?.absoluteString == "https://api.github.com" && github.apiHeaders == ["X-GitHub-Api-Version"])
        #expect(!github.apiAllowPrivateAddresses)
        let corp = try #require(config.provider(id: "corp"))
        #expect(corp.apiBaseURL?.absoluteString == "https://api.example.com/v1" && corp.apiHeaders == ["X-Api-Version"])
        #expect(corp.apiAllowPrivateAddresses)
        #expect(config.provider(id: "plain")?.apiBaseURL == nil, "no preset, no api_base_url: no proxy")
    }

    @Test func whatTheProxyCannotUseIsAProblem() {
        let found = problems(of: "providers:\n  corp:\n    issuer: https://login.example.com\n    client_id: c\n    client_secret_env: S\n"
            + "    api_base_url: http://api.example.com/v1?key=x\n    api_headers: [Authorization, X-Forwarded-For, \"bad name\"]\n" + app,
            env: ["S": "s"])
        expectProblem(found, key: "providers.corp.api_base_url", contains: "https")
        expectProblem(found, key: "providers.corp.api_headers[0]", contains: "never passes")
        expectProblem(found, key: "providers.corp.api_headers[1]", contains: "never passes")
        expectProblem(found, key: "providers.corp.api_headers[2]", contains: "not a header name")
    }
}
