import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The few POSIX calls the state files need, with errors that name the file.
enum StateFileIO {
    struct Failure: Error, Sendable, CustomStringConvertible {
        let description: String
    }

    static func openForWriting(_ path: String, truncate: Bool) throws(Failure) -> Int32 {
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND)
        let descriptor = open(path, flags, 0o600)
        guard descriptor >= 0 else { throw failure("cannot open \(path) for writing") }
        return descriptor
    }

    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8], path: String) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw failure("cannot write \(path)")
            }
            offset += written
        }
    }

    /// Waits until the file's data is on stable storage.
    static func sync(_ descriptor: Int32, path: String) throws(Failure) {
        guard fdatasync(descriptor) == 0 else { throw failure("cannot sync \(path)") }
    }

    /// Makes a rename or a new file in `directory` durable (POSIX: fsync of the directory).
    static func syncDirectory(_ directory: String) throws(Failure) {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("cannot open directory \(directory)") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw failure("cannot sync directory \(directory)") }
    }

    static func rename(_ from: String, _ to: String) throws(Failure) {
        guard Glibc.rename(from, to) == 0 else { throw failure("cannot rename \(from) to \(to)") }
    }

    static func truncate(_ path: String, to length: Int) throws(Failure) {
        guard Glibc.truncate(path, off_t(length)) == 0 else { throw failure("cannot truncate \(path)") }
    }

    static func createDirectory(_ path: String) throws(Failure) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw Failure(description: "cannot create the state directory \(path)")
        }
    }

    private static func failure(_ what: String) -> Failure {
        Failure(description: "\(what): \(String(cString: strerror(errno)))")
    }
}

/// A file read at given offsets, by any number of threads at once.
final class PositionalFile: Sendable {
    let path: String
    private let descriptor: Int32
    let size: Int

    init(_ path: String) throws(StateFileIO.Failure) {
        self.path = path
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw StateFileIO.Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))") }
        size = Int(lseek(descriptor, 0, SEEK_END))
    }

    deinit {
        close(descriptor)
    }

    /// The `count` bytes at `offset`, or fewer at the end of the file.
    func read(at offset: Int, count: Int) throws(StateFileIO.Failure) -> [UInt8] {
        var failed: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = 0
            while initialized < count {
                let got = pread(descriptor, buffer.baseAddress! + initialized, count - initialized, off_t(offset + initialized))
                if got < 0 && errno == EINTR { continue }
                if got < 0 { failed = errno }
                if got <= 0 { break }
                initialized += got
            }
        }
        guard failed == 0 else { throw StateFileIO.Failure(description: "cannot read \(path): \(String(cString: strerror(failed)))") }
        return bytes
    }
}
