import HTTPServer

extension RateLimiter {
    /// Takes one request from `client`'s bucket, or throws 429 saying when to come back.
    func admit(_ client: String, now: Double) throws(HTTPError) {
        guard let wait = take(client, now: now) else { return }
        throw refusal(wait)
    }

    /// Throws 429 while `client`'s bucket is empty, taking nothing: for a limit that counts only
    /// some of the requests it guards, taken afterwards.
    func refuseWhileSpent(_ client: String, now: Double) throws(HTTPError) {
        guard let wait = wait(client, now: now) else { return }
        throw refusal(wait)
    }

    private func refusal(_ wait: Double) -> HTTPError {
        HTTPError(
            status: 429, code: "rate_limited",
            description: "Too many requests \(counted); retry later.",
            headers: [HTTPHeader("Retry-After", String(Int(wait.rounded(.up))))]
        )
    }
}
