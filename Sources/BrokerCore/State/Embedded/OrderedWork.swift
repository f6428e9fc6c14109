import Foundation
import Synchronization

/// Numbered items made on threads of their own and taken in their order by the calling thread:
/// a state file's frames are decrypted and decoded on every core while the caller applies
/// their records in the file's order, and a snapshot's parts are encoded on every core while
/// the caller seals and writes them in order.
///
/// At most ``window`` items per thread are made ahead of the one the caller takes next, so
/// that memory stays bounded whatever the number of items. Every thread has ended when
/// ``run(items:threads:makeWorker:take:)`` returns, whether it returns or throws.
enum OrderedWork {
    /// Items a thread may make ahead of the caller.
    static let window = 2

    /// One thread per core.
    static var defaultThreads: Int { ProcessInfo.processInfo.activeProcessorCount }

    /// Makes items `0..<items`, each with a worker that `makeWorker` gives each thread (its own
    /// state, such as a scope table, lives in it), and hands them to `take` in order. When
    /// `take` throws, no further item is begun and the error is rethrown. With one item or
    /// one thread, everything is done on the calling thread.
    static func run<Item: Sendable, Failure: Error>(
        items: Int, threads: Int = defaultThreads,
        makeWorker: @escaping @Sendable () -> (Int) -> Item,
        take: (Item) throws(Failure) -> Void
    ) throws(Failure) {
        let threads = min(threads, items)
        guard threads > 1 else {
            let work = makeWorker()
            for index in 0..<items { try take(work(index)) }
            return
        }
        let shared = Shared<Item>(items: items, slots: threads * window)
        for _ in 0..<threads {
            Thread.detachNewThread { shared.work(with: makeWorker()) }
        }
        defer { shared.stop(threads: threads) }
        for index in 0..<items {
            try take(shared.take(index))
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

        /// Lets every thread end (those waiting for a slot get one, see the stop and end) and
        /// waits until they have.
        func stop(threads: Int) {
            stopped.store(true, ordering: .releasing)
            for _ in 0..<threads { slots.signal() }
            for _ in 0..<threads { finished.wait() }
        }
    }
}
