/// Why a single value was rejected, before the loader knows which key it came from.
struct ConfigValueError: Error, Sendable, Equatable {
    /// The human sentence that becomes `ConfigProblem.message`.
    var message: String

    init(_ message: String) {
        self.message = message
    }
}
