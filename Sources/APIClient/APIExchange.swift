import CurlShim
import Foundation

/// One request to an API upstream for the API proxy, and its answer: performed by libcurl on one
/// of the proxy's threads (`perform` suspends the caller meanwhile). No redirect is followed and no
/// proxy from the environment used; only https (and http where allowed) is spoken; every address
/// the host resolves to is checked before connecting, so that neither a name that resolves to an
/// internal address nor one that changes its answer between a check and the connection (DNS
/// rebinding) reaches loopback, private, link-local, cloud-metadata, multicast or reserved
/// addresses unless the provider allows private addresses; the answer is held whole up to a cap,
/// never truncated.
public struct APIRequest: Sendable {
    public var method: String
    public var url: String
    /// Sent as they are, `(name, value)`; names and values already checked by the caller.
    public var headers: [(String, String)]
    /// nil: no body.
    public var body: [UInt8]?
    public var timeoutSeconds: Double
    public var maxResponseBytes: Int
    public var allowPrivateAddresses: Bool
    public var allowHTTP: Bool

    public init(method: String, url: String, headers: [(String, String)], body: [UInt8]?, timeoutSeconds: Double,
                maxResponseBytes: Int, allowPrivateAddresses: Bool, allowHTTP: Bool) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutSeconds = timeoutSeconds
        self.maxResponseBytes = maxResponseBytes
        self.allowPrivateAddresses = allowPrivateAddresses
        self.allowHTTP = allowHTTP
    }
}

/// The upstream's answer.
public struct APIResponse: Sendable {
    public let status: Int
    /// Header lines in order, as received (names as the upstream spelled them).
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]
}

/// Why there is no answer. Descriptions never hold a header, body or query string.
public enum APIExchangeError: Error, Sendable, Equatable {
    /// Every address of the host is in a refused range.
    case addressRefused
    /// The answer's body is over the cap.
    case tooLarge
    case timedOut
    /// Resolution, connection or TLS failed.
    case unreachable(String)
    case failed(String)
}

public enum APIExchange {
    /// The threads transfers run on: as many as libcurl handles are kept (`POOL_SIZE` in proxy.c).
    private static let threads = BlockingThreads(limit: 64)

    /// Performs `request` on one of the proxy's threads.
    public static func perform(_ request: APIRequest) async -> Result<APIResponse, APIExchangeError> {
        await withCheckedContinuation { continuation in
            threads.run { continuation.resume(returning: performBlocking(request)) }
        }
    }

    /// Whether the address policy refuses an IP literal; nil when `address` is not one.
    public static func refuses(address: String) -> Bool? {
        switch tb_proxy_address_refused(address) {
        case 0: false
        case 1: true
        default: nil
        }
    }

    private static func performBlocking(_ request: APIRequest) -> Result<APIResponse, APIExchangeError> {
        let lines = request.headers.map { "\($0.0): \($0.1)" }
        var cLines = lines.map { strdup($0) }
        defer { cLines.forEach { free($0) } }
        var response = tb_proxy_response()
        defer { tb_proxy_response_free(&response) }
        let body = request.body ?? []
        request.method.withCString { method in
            request.url.withCString { url in
                cLines.withUnsafeMutableBufferPointer { linePointers in
                    linePointers.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: max(linePointers.count, 1)) { headerArray in
                        body.withUnsafeBufferPointer { bodyBytes in
                            var cRequest = tb_proxy_request(
                                method: method, url: url, headers: lines.isEmpty ? nil : headerArray, header_count: lines.count,
                                body: bodyBytes.baseAddress, body_length: bodyBytes.count, has_body: request.body == nil ? 0 : 1,
                                timeout_ms: Int(request.timeoutSeconds * 1000), connect_timeout_ms: Int(request.timeoutSeconds * 500),
                                max_response_bytes: request.maxResponseBytes,
                                allow_private_addresses: request.allowPrivateAddresses ? 1 : 0, allow_http: request.allowHTTP ? 1 : 0
                            )
                            tb_proxy_perform(&cRequest, &response)
                        }
                    }
                }
            }
        }
        let error = withUnsafeBytes(of: response.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        switch Int(response.outcome) {
        case Int(TB_PROXY_OK.rawValue): break
        case Int(TB_PROXY_ADDRESS_REFUSED.rawValue): return .failure(.addressRefused)
        case Int(TB_PROXY_TOO_LARGE.rawValue): return .failure(.tooLarge)
        case Int(TB_PROXY_TIMEOUT.rawValue): return .failure(.timedOut)
        case Int(TB_PROXY_UNREACHABLE.rawValue): return .failure(.unreachable(error))
        default: return .failure(.failed(error))
        }
        let headerText = response.headers.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: response.headers_length), as: UTF8.self) } ?? ""
        var headers: [(name: String, value: String)] = []
        for line in headerText.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let bytes = response.body.map { Array(UnsafeBufferPointer(start: $0, count: response.body_length)) } ?? []
        return .success(APIResponse(status: response.status, headers: headers, body: bytes))
    }
}
