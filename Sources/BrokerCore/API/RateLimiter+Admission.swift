import HTTPServer

extension RateLimiter {
    /// Takes one request from `client`'s bucket, or throws 429 saying when to come back.
    func admit(_ client: String, now: Double) throws(HTTPError) {
        guard let wait = take(client, now: now) else { return }
        throw HTTPError(
            status: 429, code: "rate_limited",
            description: "Too many requests from this address; retry later.",
            headers: [HTTPHeader("Retry-After", String(Int(wait.rounded(.up))))]
        )
    }
}
