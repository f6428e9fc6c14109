import Foundation

// How the tests wait (both test targets): for a condition, looked at often, with a deadline
// generous for a busy CI machine, naming the condition when it never came — never a fixed time.

/// What a test waited for that did not come.
public struct ConditionTimedOut: Error, CustomStringConvertible {
    public let condition: String
    public let seconds: Double
    public var description: String { "timed out after \(seconds) s waiting until \(condition)" }
}

/// Waits until `condition` holds, looking every 10 ms, for at most `seconds` — generous, for a
/// busy CI machine: a test waits for what it is about, never a fixed time. Throws, naming the
/// condition, when it does not come.
public func waitUntil(_ condition: String, seconds: Double = 30, _ holds: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while try await !holds() {
        guard ContinuousClock.now < deadline else { throw ConditionTimedOut(condition: condition, seconds: seconds) }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// ``waitUntil(_:seconds:_:)`` for a test that is not async: the thread sleeps between looks.
public func waitUntilBlocking(_ condition: String, seconds: Double = 30, _ holds: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(seconds)
    while try !holds() {
        guard Date() < deadline else { throw ConditionTimedOut(condition: condition, seconds: seconds) }
        usleep(10_000)
    }
}
