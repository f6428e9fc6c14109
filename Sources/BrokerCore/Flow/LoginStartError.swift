/// Why ``LoginFlow/begin(_:at:state:)`` could not start a login.
enum LoginStartError: Error, Sendable {
    /// The login could not be stored.
    case unsaved(StateWriteError)
    /// The provider's discovery document lacks what its configuration relies on
    /// (``Provider/problems``; the log says what).
    case unsuitableProvider
    /// The provider refused the pushed authorization request, or could not be reached.
    case pushRefused(ProviderCallError)
}
