#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Where log lines go: standard output (one `write` per line, so lines from several threads never
/// interleave and nothing waits in a buffer when the process dies), or memory for tests.
public final class LogOutput: Sendable {
    private enum Target {
        case fileDescriptor(Int32)
        case memory
    }

    private let target: Target
    private let captured = Mutex<[String]>([])

    private init(_ target: Target) {
        self.target = target
    }

    public static let standardOutput = LogOutput(.fileDescriptor(STDOUT_FILENO))

    /// Keeps lines in memory (see `lines`).
    public static func memory() -> LogOutput { LogOutput(.memory) }

    /// The lines written so far, for an in-memory output.
    public var lines: [String] { captured.withLock { $0 } }

    func write(_ line: [UInt8]) {
        switch target {
        case .fileDescriptor(let descriptor):
            line.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                    if written > 0 {
                        offset += written
                    } else if written < 0 && errno == EINTR {
                        continue
                    } else {
                        return
                    }
                }
            }
        case .memory:
            captured.withLock { $0.append(String(decoding: line.dropLast(), as: UTF8.self)) }
        }
    }
}
