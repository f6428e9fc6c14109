import MHDShim

/// A response body written while it is sent (chunked), for an answer that arrives piece by piece
/// (the API proxy's). A producer, off the server threads, writes it with
/// ``write(_:waitingAtMost:)`` — which waits while `capacity` bytes are buffered and unsent, up
/// to a deadline — and ends it with ``finish(ok:)``; a body broken off (`ok: false`) closes the
/// connection, so that a client never takes a cut body for a whole one. A response carrying it sends its status and headers at once.
public final class ResponseStream: @unchecked Sendable {
    // The shim's stream is thread-safe; this object only carries its pointer.
    let pointer: OpaquePointer

    /// Nil when no memory is left.
    public init?(capacity: Int) {
        guard let pointer = tb_stream_create(capacity) else { return nil }
        self.pointer = pointer
    }

    /// Appends `bytes`, waiting at most `milliseconds` for room; false when nobody will read them
    /// (the client went away, or the server is stopping) or the client did not take enough in
    /// time: stop writing, and finish.
    public func write(_ bytes: UnsafeRawBufferPointer, waitingAtMost milliseconds: Int) -> Bool {
        tb_stream_write(pointer, bytes.baseAddress, bytes.count, milliseconds) != 0
    }

    /// Ends the body; the producer's last call.
    public func finish(ok: Bool) {
        tb_stream_finish(pointer, ok ? 1 : 0)
    }
}
