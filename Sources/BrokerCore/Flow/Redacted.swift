/// Values that hold tokens, codes or verifiers: printed, interpolated or dumped, they show their
/// type's name only, so that a stray `"\(session)"` in a log line leaks nothing.
protocol Redacted: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {}

extension Redacted {
    var description: String { "\(Self.self)(<redacted>)" }
    var debugDescription: String { description }
    var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension Session: Redacted {}
extension Grant: Redacted {}
extension PendingAuthorization: Redacted {}
extension Handoff: Redacted {}
extension TokenResponse: Redacted {}
extension StateRecord: Redacted {}
extension QueuedRevocation: Redacted {}
extension DeviceAuthorization: Redacted {}
