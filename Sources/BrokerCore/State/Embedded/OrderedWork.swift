import Foundation
import Synchronization

/// Numbered items made on threads of their own and taken in their order by the calling thread:
/// a state file's frames are decrypted and decoded on every core while the caller applies
/// their records in the file's order, and a snapshot's parts are encoded on every core while
/// the caller seals and writes them in order.
///
/// At most ``window`` items per thread are made ahead of the one the caller takes next, so
/// that the items in memory are bounded whatever their number (their size is the caller's to
/// bound: the snapshot writer runs on fewer threads, its items being whole shards). Every
/// thread has made its last item when ``run(items:threads:makeWorker:take:)`` returns, whether
/// it returns or throws. A thread that cannot be started (a container's limit on processes)
/// leaves the work to those that could, or to the calling thread.
enum OrderedWork {
    /// Items a thread may make ahead of the caller.
    static let window = 2

    /// One thread per core.
    static var defaultThreads: Int { ProcessInfo.processInfo.activeProcessorCount }

    /// Makes items `0..<items`, each with a worker that `makeWorker` gives each thread (its own
    /// state, such as a scope table, lives in it), and hands them to `take` in order. When
    /// `take` throws, no further item is begun and the error is rethrown. With one item or
    /// one thread, everything is done on the calling thread. `start` starts a thread (tests
    /// pass one that refuses).
    static func run<Item: Sendable, Failure: Error>(
        items: Int, threads: Int = defaultThreads,
        start: (@escaping @Sendable () -> Void) -> Bool = startThread,
        makeWorker: @escaping @Sendable () -> (Int) -> Item,
        take: (Item) throws(Failure) -> Void
    ) throws(Failure) {
        func onThisThread() throws(Failure) {
            let work = makeWorker()
            for index in 0..<items { try take(work(index)) }
        }
        let threads = min(threads, items)
        guard threads > 1 else { return try onThisThread() }
        let shared = Shared<Item>(items: items, slots: threads * window)
        var started = 0
        for _ in 0..<threads where start({ shared.work(with: makeWorker()) }) {
            started += 1
        }
        guard started > 0 else { return try onThisThread() }
        defer { shared.stop(threads: started) }
        for index in 0..<items {
            try take(shared.take(index))
        }
    }

    /// Starts `body` on a detached thread of its own; false when the system refuses one.
    /// (Foundation's `Thread.detachNewThread` ignores `pthread_create`'s failure: the work would
    /// wait for a thread that never runs.)
    static func startThread(_ body: @escaping @Sendable () -> Void) -> Bool {
        let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            Unmanaged<ThreadBody>.fromOpaque(context).takeRetainedValue().body()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }

    private final class ThreadBody: Sendable {
        let body: @Sendable () -> Void

        init(_ body: @escaping @Sendable () -> Void) {
            self.body = body
        }
    }

    private final class Shared<Item: Sendable>: Sendable {
        private let items: Int
        /// Items begun and not yet taken: a thread waits for a slot before it begins one.
        private let slots: DispatchSemaphore
        private let next = Atomic<Int>(0)
        private let stopped = Atomic<Bool>(false)
        private let made: Mutex<[Item?]>
        private let ready: [DispatchSemaphore]
        private let finished = DispatchSemaphore(value: 0)

        init(items: Int, slots: Int) {
            self.items = items
            // Signalled rather than made with a value: libdispatch traps when a semaphore ends
            // below the value it was made with.
            self.slots = DispatchSemaphore(value: 0)
            for _ in 0..<slots { self.slots.signal() }
            made = Mutex([Item?](repeating: nil, count: items))
            ready = (0..<items).map { _ in DispatchSemaphore(value: 0) }
        }

        /// A thread's loop: the next item not yet begun, until there is none or the caller stops.
        func work(with worker: (Int) -> Item) {
            while true {
                slots.wait()
                guard !stopped.load(ordering: .acquiring) else { break }
                let index = next.wrappingAdd(1, ordering: .relaxed).oldValue
                guard index < items else { break }
                let item = worker(index)
                made.withLock { $0[index] = item }
                ready[index].signal()
            }
            finished.signal()
        }

        /// Waits for item `index`, frees its slot and hands it over.
        func take(_ index: Int) -> Item {
            ready[index].wait()
            let item = made.withLock { made in
                defer { made[index] = nil }
                return made[index]
            }
            slots.signal()
            guard let item else { preconditionFailure("item \(index) was ready without being made") }
            return item
        }

        /// Lets the `threads` started end (one waiting for a slot gets one, sees `stopped` and
        /// ends) and waits until each has made its last item.
        func stop(threads: Int) {
            stopped.store(true, ordering: .releasing)
            for _ in 0..<threads { slots.signal() }
            for _ in 0..<threads { finished.wait() }
        }
    }
}
