import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL server for the tests: Debian's `initdb` in a temporary directory (run
/// as the `postgres` user when the tests run as root), listening on a free loopback port, with
/// password authentication over TCP (the broker's password path) and trust on its own Unix
/// socket (for creating databases). One per test process, started on first use and removed when
/// the process exits. `make test` installs the `postgresql` package.
final class PostgresTestCluster: Sendable {
    static let password = "test-password"

    let directory: String
    let port: Int

    /// The cluster, or why there is none.
    static let shared: Result<PostgresTestCluster, ClusterError> = Result { () throws(ClusterError) in try PostgresTestCluster() }

    struct ClusterError: Error, CustomStringConvertible {
        let description: String
    }

    private init() throws(ClusterError) {
        let bin = try Self.binaries()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("pg-\(UUID().uuidString)").path
        port = Self.freePort()
        let data = directory + "/data"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let passwordFile = directory + "/password"
        _ = FileManager.default.createFile(atPath: passwordFile, contents: Data(Self.password.utf8))
        let asPostgres = getuid() == 0
        if asPostgres { try Self.run("/bin/chown", ["-R", "postgres:postgres", directory]) }
        try Self.run(bin + "/initdb", ["-D", data, "-U", "postgres", "--pwfile", passwordFile, "--auth-local=trust",
                                       "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"], asPostgres: asPostgres)
        try Self.run(bin + "/pg_ctl", ["-D", data, "-l", directory + "/log", "-w", "-o",
                                       "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=1500", "start"], asPostgres: asPostgres)
        Self.stopAtExit = (bin + "/pg_ctl", data, directory, asPostgres)
        atexit {
            guard let (pgctl, data, directory, asPostgres) = PostgresTestCluster.stopAtExit else { return }
            try? PostgresTestCluster.run(pgctl, ["-D", data, "-m", "immediate", "stop"], asPostgres: asPostgres)
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    nonisolated(unsafe) private static var stopAtExit: (String, String, String, Bool)?

    /// A new, empty database: its URL (without the password, which is ``password``).
    func createDatabase() throws(ClusterError) -> String {
        let name = "broker_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        try Self.run("/usr/bin/psql", ["-h", directory, "-p", String(port), "-U", "postgres", "-d", "postgres", "-q", "-c", "CREATE DATABASE \(name)"])
        return "postgres://postgres@127.0.0.1:\(port)/\(name)"
    }

    private static func binaries() throws(ClusterError) -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }
        guard let version = versions.first(where: { FileManager.default.isExecutableFile(atPath: "\(root)/\($0)/bin/initdb") }) else {
            throw ClusterError(description: "no PostgreSQL server under \(root) (Debian's postgresql package; make test installs it)")
        }
        return "\(root)/\(version)/bin"
    }

    private static func freePort() -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs `tool` and waits for it (posix_spawn and waitpid: Foundation's `Process` does not
    /// reap its child when waited on inside a static initializer). Output goes to a file, not a
    /// pipe, which the server pg_ctl starts would hold open for its lifetime.
    private static func run(_ tool: String, _ arguments: [String], asPostgres: Bool = false) throws(ClusterError) {
        let argv = asPostgres ? ["/usr/sbin/runuser", "-u", "postgres", "--", tool] + arguments : [tool] + arguments
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("pg-run-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var pid = pid_t()
        let pointers = argv.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        guard posix_spawn(&pid, argv[0], &actions, nil, pointers, environ) == 0 else {
            throw ClusterError(description: "cannot run \(tool)")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        guard status == 0 else {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw ClusterError(description: "\(tool) failed (status \(status)): \(text.suffix(600))")
        }
    }
}
