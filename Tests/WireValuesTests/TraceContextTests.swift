import Testing
import WireValues

/// Which `traceparent` values are passed on (W3C Trace Context §3.2), and what a call carries.
struct TraceContextTests {
    private let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test func aWellFormedTraceparentIsKept() {
        #expect(TraceContext.traceparent(valid) == valid)
        // A later version may add fields after its four.
        #expect(TraceContext.traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra") != nil)
    }

    @Test func malformedTraceparentsAreDropped() {
        for bad in [
            "", "garbage", String(valid.dropLast()), valid + "-more", valid.uppercased(),
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // A later version's tail may not carry a line break or a space into a header.
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-a\r\nX-Injected: 1",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-a b",
        ] {
            #expect(TraceContext.traceparent(bad) == nil, "\(bad)")
        }
    }

    @Test func aCallCarriesTheRequestIdAndTheTraceWithItsState() {
        let traced = TraceContext(requestID: "incident-42", traceparent: valid, tracestate: "vendor=1")
        #expect(traced.headers.map(\.0) == ["X-Request-Id", "traceparent", "tracestate"])
        #expect(traced.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        let untraced = TraceContext(requestID: "r-1", traceparent: nil, tracestate: "vendor=1")
        #expect(untraced.headers.map(\.0) == ["X-Request-Id"], "a tracestate without its traceparent is not passed on")
        let long = TraceContext(requestID: "r-1", traceparent: valid, tracestate: String(repeating: "a", count: 513))
        #expect(long.tracestate == nil)
        let broken = TraceContext(requestID: "r-1", traceparent: valid, tracestate: "a=1\r\nX-Injected: 1")
        #expect(broken.tracestate == nil, "a line break never reaches a header")
    }
}
