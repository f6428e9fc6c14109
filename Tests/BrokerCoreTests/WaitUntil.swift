import Foundation

/// What a test waited for that did not come.
struct ConditionTimedOut: Error, CustomStringConvertible {
    let condition: String
    let seconds: Double
    var description: String { "timed out after \(seconds) s waiting until \(condition)" }
}

/// Waits until `condition` holds, looking every 10 ms, for at most `seconds` — generous, for a
/// busy CI machine: a test waits for what it is about, never a fixed time. Throws, naming the
/// condition, when it does not come.
func waitUntil(_ condition: String, seconds: Double = 30, _ holds: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while try await !holds() {
        guard ContinuousClock.now < deadline else { throw ConditionTimedOut(condition: condition, seconds: seconds) }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// ``waitUntil(_:seconds:_:)`` for a test that is not async: the thread sleeps between looks.
func waitUntilBlocking(_ condition: String, seconds: Double = 30, _ holds: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(seconds)
    while try !holds() {
        guard Date() < deadline else { throw ConditionTimedOut(condition: condition, seconds: seconds) }
        usleep(10_000)
    }
}
