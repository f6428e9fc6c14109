internal import CLibPQ
#if canImport(Glibc)
internal import Glibc
#endif

/// One connection to PostgreSQL. Its calls block, so it lives on a thread of its own (a
/// ``PostgresPool`` worker or the ``PostgresListener``) and is used from that thread only.
public final class PostgresConnection {
    /// What a connection is opened with.
    public struct Options: Sendable {
        /// A libpq connection URI (`postgres://user@host:port/db?sslmode=…`), without a password.
        public var url: String
        /// Passed to libpq on its own, never in the URI.
        public var password: String?
        public var connectTimeoutSeconds: Int
        /// Longest any statement may run (0: no limit).
        public var statementTimeoutSeconds: Int
        /// Faults a test injects (never set otherwise).
        public var faults: PostgresFaults?

        public init(url: String, password: String?, connectTimeoutSeconds: Int = 5, statementTimeoutSeconds: Int = 5, faults: PostgresFaults? = nil) {
            self.url = url
            self.password = password
            self.connectTimeoutSeconds = connectTimeoutSeconds
            self.statementTimeoutSeconds = statementTimeoutSeconds
            self.faults = faults
        }
    }

    let handle: OpaquePointer
    private let faults: PostgresFaults?

    /// Connects, or throws `.connection` with libpq's reason.
    public init(_ options: Options) throws(PostgresError) {
        // A peer gone silently (a dropped NAT entry, a host lost) is noticed within about 30 s —
        // TCP keepalives, and a bound on unacknowledged sends — rather than the kernel's hours:
        // the notification connection would otherwise wait on it, its instance serving sessions
        // other instances have revoked. Before `dbname`, so that the URL can set its own. Doubles
        // are read back exactly (a refresh names its lease row by its `held_until`), whatever
        // the server's or role's `extra_float_digits` and the server's version.
        var keywords = ["keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout",
                        "dbname", "connect_timeout", "application_name", "options"]
        var values = [
            "1", "10", "5", "3", "30000",
            options.url, String(max(1, options.connectTimeoutSeconds)), "token-broker",
            "-c statement_timeout=\(options.statementTimeoutSeconds * 1000) -c extra_float_digits=3",
        ]
        if let password = options.password {
            keywords.append("password")
            values.append(password)
        }
        // expand_dbname = 1: the URI in `dbname` is expanded; the keywords after it win.
        let connection = Self.withCStrings(keywords) { keywords in
            Self.withCStrings(values) { values in PQconnectdbParams(keywords, values, 1) }
        }
        guard let connection else { throw .connection("out of memory") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.message(PQerrorMessage(connection))
            PQfinish(connection)
            throw .connection(message)
        }
        // Server notices (a migration's "already exists") are not errors; libpq would print
        // them to standard error, outside the broker's log format.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        handle = connection
        faults = options.faults
    }

    deinit {
        PQfinish(handle)
    }

    /// Whether the connection is still usable (false once the server or network dropped it).
    public var isHealthy: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Whether an idle connection is still usable. An idle connection of a pool receives nothing
    /// (it does not LISTEN), so anything to read means the server shut down or ended the session
    /// and closed its end, which libpq notices only when it next reads: such a connection is
    /// given up before a statement is lost on it. A poll that does not wait. One left inside a
    /// transaction (a rollback that failed) is given up too: the next call's statements would
    /// join that transaction, and its `SET LOCAL`s.
    func isAliveAfterIdle() -> Bool {
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        return isHealthy && PQtransactionStatus(handle) == PQTRANS_IDLE && poll(&descriptor, 1, 0) == 0
    }

    /// Runs one statement with `$1…$n` parameters (never spliced into the text) and returns
    /// its rows.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> PostgresRows {
        var texts: [[UInt8]?] = []
        var types: [Oid] = []
        var formats: [Int32] = []
        for parameter in parameters {
            switch parameter {
            case .null: texts.append(nil); types.append(0); formats.append(0)
            case .text(let text): texts.append(Array(text.utf8) + [0]); types.append(0); formats.append(0)
            case .int(let value): texts.append(Array(String(value).utf8) + [0]); types.append(20); formats.append(0)
            case .double(let value): texts.append(Array("\(value)".utf8) + [0]); types.append(701); formats.append(0)
            case .bytes(let bytes): texts.append(bytes); types.append(17); formats.append(1)
            }
        }
        let lengths = texts.map { Int32($0?.count ?? 0) }
        let result = Self.withPointers(texts) { pointers in
            PQexecParams(handle, sql, Int32(parameters.count), types, pointers, lengths, formats, 0)
        }
        guard let result else { throw .connection(Self.message(PQerrorMessage(handle))) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            var rows: [[String?]] = []
            let rowCount = PQntuples(result)
            let columns = PQnfields(result)
            rows.reserveCapacity(Int(rowCount))
            for row in 0..<rowCount {
                var values: [String?] = []
                values.reserveCapacity(Int(columns))
                for column in 0..<columns {
                    values.append(PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column)))
                }
                rows.append(values)
            }
            let affected = Int(String(cString: PQcmdTuples(result))) ?? rows.count
            return PostgresRows(values: rows, affected: affected)
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            guard !state.isEmpty, isHealthy else { throw .connection(Self.message(PQerrorMessage(handle))) }
            let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) } ?? "error"
            throw .query(sqlState: state, message: primary)
        }
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws. When
    /// the connection breaks while the COMMIT of a transaction that wrote is on its way, whether
    /// it committed is unknown here: that throws ``PostgresError/commitUnacknowledged(transaction:_:)``
    /// with the transaction's id (one that wrote nothing has none, and its loss is an ordinary
    /// connection failure), which ``commitStatus(of:)`` looks up on another connection.
    public func transaction<T>(_ body: (PostgresConnection) throws(PostgresError) -> T) throws(PostgresError) -> T {
        try execute("BEGIN")
        let value: T
        let transaction: Int64?
        do {
            value = try body(self)
            transaction = try execute("SELECT txid_current_if_assigned()").int(0, 0)
        } catch {
            if isHealthy { _ = try? execute("ROLLBACK") }
            throw error
        }
        if faults?.takeLostAcknowledgement() == true {
            // The COMMIT still goes out; its answer can no longer come in.
            shutdown(PQsocket(handle), Int32(SHUT_RD))
        }
        do {
            try execute("COMMIT")
        } catch {
            guard case .connection(let message) = error, let transaction else { throw error }
            throw .commitUnacknowledged(transaction: transaction, message)
        }
        return value
    }

    /// What became of the transaction `transaction` (a recent one's id).
    public func commitStatus(of transaction: Int64) throws(PostgresError) -> CommitStatus {
        switch try execute("SELECT txid_status($1)", [.int(transaction)]).string(0, 0) {
        case "committed": .committed
        case "aborted": .aborted
        case "in progress": .inProgress
        default: .unknown
        }
    }

    /// What became of a transaction (``commitStatus(of:)``).
    public enum CommitStatus: Sendable {
        case committed
        case aborted
        /// Its COMMIT has not finished yet (its backend has not seen the connection drop).
        case inProgress
        /// Too old to be told, or from before a failover.
        case unknown
    }

    /// libpq's message, on one line.
    static func message(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "unknown error" }
        return String(cString: text).split(whereSeparator: \.isNewline).joined(separator: " ")
    }

    private static func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        defer { pointers.forEach { free($0) } }
        pointers.append(nil)
        return body(pointers.map { $0.map { UnsafePointer($0) } })
    }

    private static func withPointers<R>(_ buffers: [[UInt8]?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        var copies: [UnsafeMutablePointer<CChar>?] = buffers.map { buffer in
            guard let buffer else { return nil }
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, buffer.count))
            buffer.withUnsafeBytes { raw in
                if let base = raw.baseAddress { copy.update(from: base.assumingMemoryBound(to: CChar.self), count: buffer.count) }
            }
            return copy
        }
        defer { copies.forEach { $0?.deallocate() } }
        copies.append(nil)
        return body(copies.map { $0.map { UnsafePointer($0) } })
    }
}
