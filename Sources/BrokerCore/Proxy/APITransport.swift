import APIClient

/// Where the API proxy's exchanges go: libcurl's event loop (``APITransfers``) when the broker
/// serves, a script in the tests — as providers' calls go through `UpstreamTransport`.
protocol APITransport: Sendable {
    /// Starts `request`; `completion` gets the answer (whole, or its head with the body streaming
    /// into the sink `stream` chose), on whatever thread the exchange ends on.
    func start(_ request: APIRequest, stream: (@Sendable (_ status: Int, _ contentLength: Int64?) -> (any APIBodySink)?)?,
               completion: @escaping @Sendable (Result<APIAnswer, APIExchangeError>) -> Void)
    /// `start`, awaited.
    func perform(_ request: APIRequest, stream: (@Sendable (_ status: Int, _ contentLength: Int64?) -> (any APIBodySink)?)?) async
        -> Result<APIAnswer, APIExchangeError>
}

extension APITransfers: APITransport {}
