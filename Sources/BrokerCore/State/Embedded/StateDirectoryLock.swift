import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One broker per state directory: two would interleave their journals, and each one's snapshot
/// would retire the other's journals. A broker holds a POSIX record lock on `<directory>/lock`
/// for as long as its process lives; the kernel releases it when the process ends, however it
/// ends (`kill -9` included), so a stale lock never blocks a restart.
///
/// The lock belongs to the process (POSIX record locks do): a process that opens the same
/// directory again (the tests, reopening it as a restart would) keeps the lock it has.
enum StateDirectoryLock {
    static let fileName = "lock"

    /// Directories this process has locked, with the descriptor that holds each lock open:
    /// closing any descriptor of the file would release it.
    private static let held = Mutex<[String: Int32]>([:])

    static func acquire(_ directory: String) throws(StateFileIO.Failure) {
        let path = "\(directory)/\(fileName)"
        let failure: StateFileIO.Failure? = held.withLock { held in
            guard held[path] == nil else { return nil }
            let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                return StateFileIO.Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))")
            }
            if let pid = lock(descriptor, F_WRLCK) {
                return StateFileIO.Failure(description: """
                    another broker\(pid) is using the state directory \(directory): it holds \(path). \
                    Two brokers on one directory would interleave their journals; stop the other one, \
                    or give this one a state.directory of its own.
                    """)
            }
            held[path] = descriptor
            return nil
        }
        if let failure { throw failure }
    }

    /// Takes `directory`'s lock for reading, without creating or changing a file (for `state
    /// import`, which reads a directory and writes nothing): while the returned descriptor is
    /// open, a broker cannot start on the directory (its write lock fails), and none runs on it
    /// (its lock would have refused this one). Nil when there is no lock file (no broker has run
    /// there) or this process holds the lock already. Release with `close`.
    static func acquireForReading(_ directory: String) throws(StateFileIO.Failure) -> Int32? {
        let path = "\(directory)/\(fileName)"
        guard held.withLock({ $0[path] == nil }) else { return nil }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            guard errno != ENOENT else { return nil }
            throw StateFileIO.Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        if let pid = lock(descriptor, F_RDLCK) {
            throw StateFileIO.Failure(description: "a broker\(pid) is using \(directory): stop it first, so that the import reads all it wrote")
        }
        return descriptor
    }

    /// Takes a lock of `type` on the whole file open at `descriptor`: nil when it is taken, else
    /// who holds it (" (process N)", or "" when that cannot be read), the descriptor closed.
    private static func lock(_ descriptor: Int32, _ type: Int32) -> String? {
        var lock = wholeFile(type)
        guard fcntl(descriptor, F_SETLK, &lock) != 0 else { return nil }
        var holder = wholeFile(F_WRLCK)
        let pid = fcntl(descriptor, F_GETLK, &holder) == 0 && holder.l_type != Int16(F_UNLCK) ? " (process \(holder.l_pid))" : ""
        close(descriptor)
        return pid
    }

    private static func wholeFile(_ type: Int32) -> flock {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        return lock
    }
}
