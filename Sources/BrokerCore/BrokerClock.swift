import Foundation

/// Unix seconds now. Everything that dates sessions, codes, tokens and key sets takes one, so
/// that tests move time; the broker gives all of them ``systemClock``.
public typealias BrokerClock = @Sendable () -> Double

/// The machine's clock.
public let systemClock: BrokerClock = { Date().timeIntervalSince1970 }
