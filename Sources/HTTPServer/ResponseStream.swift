import MHDShim

/// A response body written while it is sent (chunked), for an answer that arrives piece by piece
/// (the API proxy's). A producer, off the server threads, offers it bytes with
/// ``offer(_:wake:context:tag:)`` — which never waits: while `capacity` bytes are buffered and
/// unsent it refuses more and calls the producer's waker once they fit — and ends it with
/// ``finish(ok:)``; a body broken off (`ok: false`) closes the connection, so that a client never
/// takes a cut body for a whole one. A response carrying it sends its status and headers at once.
public final class ResponseStream: @unchecked Sendable {
    // The shim's stream is thread-safe; this object only carries its pointer.
    let pointer: OpaquePointer

    /// Nil when no memory is left.
    public init?(capacity: Int) {
        guard let pointer = tb_stream_create(capacity) else { return nil }
        self.pointer = pointer
    }

    /// What the stream did with bytes offered to it.
    public enum Offer: Sendable {
        case taken
        /// No room for them yet: `wake(context, tag)` is called once — from the thread that makes
        /// room or ends the stream, the producer's own when it finishes — when there is room, or
        /// when nobody will read them; offer them again then.
        case full
        /// Nobody will read them (the client went away, or the server is stopping), or they are
        /// more than `capacity`: stop writing, and finish.
        case closed
    }

    /// Appends all of `bytes`, or none; never waits.
    public func offer(_ bytes: UnsafeRawBufferPointer, wake: @convention(c) (UnsafeMutableRawPointer?, UInt64) -> Void,
                      context: UnsafeMutableRawPointer?, tag: UInt64) -> Offer {
        switch tb_stream_offer(pointer, bytes.baseAddress, bytes.count, wake, context, tag) {
        case Int32(TB_STREAM_TAKEN): .taken
        case Int32(TB_STREAM_FULL): .full
        default: .closed
        }
    }

    /// Ends the body; the producer's last call.
    public func finish(ok: Bool) {
        tb_stream_finish(pointer, ok ? 1 : 0)
    }

    /// Calls `ended` once, when libmicrohttpd is done with the response carrying the stream (its
    /// body sent, broken off, or never sent), with the body bytes it took: what the access log
    /// says of a streamed answer. Set at most once, before the response is made.
    func whenEnded(_ ended: @escaping @Sendable (_ sentBytes: Int) -> Void) {
        let context = Unmanaged.passRetained(Ended(ended)).toOpaque()
        tb_stream_when_ended(pointer, { context, sent in
            Unmanaged<Ended>.fromOpaque(context!).takeRetainedValue().call(Int(clamping: sent))
        }, context)
    }

    private final class Ended: Sendable {
        let call: @Sendable (Int) -> Void

        init(_ call: @escaping @Sendable (Int) -> Void) {
            self.call = call
        }
    }

    /// Gives the stream up when no response will carry it: the producer's next offer is refused
    /// (`closed`), and it finishes. At most once, and never for a stream a response carries.
    public func abandon() {
        tb_stream_abandon(pointer)
    }
}
