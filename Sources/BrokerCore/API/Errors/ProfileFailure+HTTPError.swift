import HTTPServer

extension ProfileFailure {
    /// The error a client gets.
    var httpError: HTTPError {
        switch self {
        case .noProfile: HTTPError(status: 404, code: "not_found", description: "This provider has no profile endpoint.")
        case .provider(let error): error.httpError
        case .refresh(let error): error.httpError
        case .call(let error): error.httpError
        }
    }
}
