import MHDShim
import Testing

@testable import HTTPServer

/// A streamed body's producer side without a server: bytes that do not fit are refused (never
/// waited for), and the producer's waker is called exactly once for each refusal — when the
/// stream ends (its producer finishes, or nobody will read it), if room never came.
struct ResponseStreamTests {
    /// Counts its calls in the integer `context` points to.
    private static let counting: @convention(c) (UnsafeMutableRawPointer?, UInt64) -> Void = { context, _ in
        context!.assumingMemoryBound(to: Int.self).pointee += 1
    }

    /// The calls `counting` made, in memory of its own.
    private struct Counter {
        let pointer: UnsafeMutablePointer<Int> = {
            let pointer = UnsafeMutablePointer<Int>.allocate(capacity: 1)
            pointer.initialize(to: 0)
            return pointer
        }()

        var pointee: Int { pointer.pointee }

        func deallocate() {
            pointer.deallocate()
        }
    }

    private func offer(_ stream: ResponseStream, _ count: Int, counter: Counter) -> ResponseStream.Offer {
        [UInt8](repeating: 0x61, count: count).withUnsafeBytes { stream.offer($0, wake: Self.counting, context: counter.pointer, tag: 7) }
    }

    @Test func aProducerThatFoundItFullIsWokenOnceWhenItFinishes() throws {
        let counter = Counter()
        defer { counter.deallocate() }
        let stream = try #require(ResponseStream(capacity: 16))
        #expect(offer(stream, 10, counter: counter) == .taken)
        #expect(offer(stream, 6, counter: counter) == .taken)
        #expect(offer(stream, 1, counter: counter) == .full, "nobody reads: the buffer is full")
        #expect(counter.pointee == 0)
        stream.finish(ok: false)
        #expect(counter.pointee == 1, "the waker is owed its one call")
        #expect(offer(stream, 1, counter: counter) == .closed)
        #expect(counter.pointee == 1)
        tb_stream_abandon(stream.pointer) // the response's hold: no response was made
    }

    @Test func aProducerThatFoundItFullIsWokenOnceWhenNobodyWillRead() throws {
        let counter = Counter()
        defer { counter.deallocate() }
        let stream = try #require(ResponseStream(capacity: 16))
        #expect(offer(stream, 16, counter: counter) == .taken)
        #expect(offer(stream, 4, counter: counter) == .full)
        tb_stream_abandon(stream.pointer) // as when the client goes away
        #expect(counter.pointee == 1)
        #expect(offer(stream, 4, counter: counter) == .closed)
        stream.finish(ok: false)
        #expect(counter.pointee == 1, "not called again")
    }

    @Test func moreThanTheWholeBufferIsRefusedAtOnce() throws {
        let counter = Counter()
        defer { counter.deallocate() }
        let stream = try #require(ResponseStream(capacity: 16))
        #expect(offer(stream, 17, counter: counter) == .closed)
        stream.finish(ok: true)
        tb_stream_abandon(stream.pointer)
        #expect(counter.pointee == 0)
    }
}
