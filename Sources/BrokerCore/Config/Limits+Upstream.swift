extension Limits {
    /// What calls to providers may take: ``maxUpstreamCalls`` in flight, each within
    /// ``upstreamTimeoutSeconds``.
    public var upstream: UpstreamClient.Limits {
        UpstreamClient.Limits(maxInFlight: maxUpstreamCalls, totalTimeoutSeconds: upstreamTimeoutSeconds)
    }
}
