/// Why a call to PostgreSQL failed. No message carries a password or a parameter's value: they
/// come from libpq's connection errors and the server's primary message only.
public enum PostgresError: Error, Sendable, CustomStringConvertible {
    /// No connection could be made, or it broke: the database is out of reach for now.
    case connection(String)
    /// The server refused the statement, with its SQLSTATE (`23505` unique violation, `57014`
    /// cancelled by the statement timeout, `40001` serialization failure, …).
    case query(sqlState: String, message: String)
    /// No connection of the pool came free within the acquire deadline.
    case timeout
    /// The pool was closed.
    case closed
    /// The connection broke while a COMMIT was on its way: the transaction (its id, when it wrote)
    /// may or may not have committed. ``PostgresConnection/commitStatus(of:)`` on another
    /// connection tells.
    case commitUnacknowledged(transaction: Int64, String)
    /// The caller gave the transaction up (its body found it could not go on): rolled back.
    case abandoned(String)

    public var description: String {
        switch self {
        case .connection(let message): "PostgreSQL is unreachable: \(message)"
        case .query(let state, let message): "PostgreSQL refused a statement (SQLSTATE \(state)): \(message)"
        case .timeout: "no PostgreSQL connection came free in time"
        case .closed: "the PostgreSQL pool is closed"
        case .commitUnacknowledged(_, let message): "PostgreSQL did not acknowledge a commit: \(message)"
        case .abandoned(let reason): reason
        }
    }

    /// Whether the database could not be reached (as opposed to refusing a statement).
    public var isConnectionFailure: Bool {
        switch self {
        case .connection, .timeout, .closed, .commitUnacknowledged: true
        case .query(let state, _): state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03"
        case .abandoned: false
        }
    }
}
