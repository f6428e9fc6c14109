/// Why `ProviderDirectory.resolve` has no provider to give.
enum ProviderLookupError: Error, Sendable {
    /// No provider is configured under that id.
    case unknown
    /// The provider's discovery document could not be fetched.
    case discoveryFailed
}
