import Foundation

extension ProviderDecoder {
    /// The keys that go with `token_endpoint_auth_method: private_key_jwt` only.
    static let privateKeyJWTKeys = ["private_key_file", "second_key_file", "token_endpoint_auth_signing_alg", "client_assertion_audience"]

    /// How the broker authenticates as this provider's client: a client secret for
    /// `client_secret_basic` and `client_secret_post`; for `private_key_jwt`, the key of
    /// `private_key_file` (and `second_key_file`, published beside it during a rotation) and no
    /// secret. `discovered` says whether the provider has an issuer, which the default audience
    /// and `client_assertion_audience: issuer` need.
    func decodeClientAuthentication(_ reader: YAMLMappingReader, method: TokenEndpointAuthMethod, discovered: Bool,
                                    problems: inout ConfigProblemList) -> ClientAuthentication? {
        guard method == .privateKeyJWT else {
            for key in Self.privateKeyJWTKeys where reader.has(key) {
                problems.add(path.child(key), "is used only with token_endpoint_auth_method: private_key_jwt", line: reader.line(of: key))
            }
            guard let secret = decodeSecret(reader, problems: &problems) else { return nil }
            return method == .clientSecretPost ? .clientSecretPost(secret) : .clientSecretBasic(secret)
        }
        for key in ["client_secret_env", "client_secret_file"] where reader.has(key) {
            problems.add(path.child(key), "is not used with private_key_jwt, which signs with private_key_file: remove it",
                         line: reader.line(of: key))
        }
        guard reader.has("private_key_file") else {
            problems.add(path.child("private_key_file"), "required key is missing: private_key_jwt signs with the private "
                + "key in this PEM file (RSA of 2048 bits or more, or EC P-256)", line: line)
            return nil
        }
        let signingKey = key(reader, "private_key_file", publicAllowed: false, problems: &problems)
        let secondKey = reader.has("second_key_file") ? key(reader, "second_key_file", publicAllowed: true, problems: &problems) : nil
        let algorithm = reader.parsed("token_endpoint_auth_signing_alg", expected: "an algorithm", problems: &problems) {
            ConfigValueParsing.choice($0, among: SignatureAlgorithm.clientAssertion)
        }
        var audience = discovered ? ClientAssertionAudience.issuer : .endpoint
        if reader.has("client_assertion_audience") {
            guard let chosen = reader.parsed("client_assertion_audience", expected: "issuer or endpoint", problems: &problems, {
                ConfigValueParsing.choice($0, as: ClientAssertionAudience.self)
            }) else { return nil }
            if chosen == .issuer, !discovered {
                problems.add(path.child("client_assertion_audience"), "issuer needs a provider configured by issuer "
                    + "(explicit endpoints have no issuer identifier); use endpoint", line: reader.line(of: "client_assertion_audience"))
                return nil
            }
            audience = chosen
        }
        guard let signingKey, !(reader.has("second_key_file") && secondKey == nil),
              !(reader.has("token_endpoint_auth_signing_alg") && algorithm == nil) else { return nil }
        if let secondKey, secondKey.keyID == signingKey.keyID {
            problems.add(path.child("second_key_file"), "holds the same key as private_key_file", line: reader.line(of: "second_key_file"))
            return nil
        }
        // Only a chosen algorithm can fail to fit the key: the default is the key's own.
        let signer = ClientAssertionSigner.make(signingKey: signingKey, algorithm: algorithm, secondKey: secondKey, audience: audience)
        return problems.check(signer, at: path.child("token_endpoint_auth_signing_alg"),
                              line: reader.line(of: "token_endpoint_auth_signing_alg")).map { .privateKeyJWT($0) }
    }

    /// The key in the PEM file under `key` (a relative path is resolved from the configuration
    /// file's directory); problems name the path, never the content.
    private func key(_ reader: YAMLMappingReader, _ key: String, publicAllowed: Bool, problems: inout ConfigProblemList) -> ClientAssertionKey? {
        guard let path = reader.string(key, problems: &problems) else { return nil }
        let fullPath = SecretReference.absolutePath(path, baseDirectory: baseDirectory)
        let result = SecretReference.readText(fullPath, what: "key file").flatMap { text in
            ClientAssertionKey.parse(pem: text, source: fullPath, publicAllowed: publicAllowed).mapError { ConfigValueError("\(fullPath) \($0.message)") }
        }
        return problems.check(result, at: self.path.child(key), line: reader.line(of: key))
    }

    /// `par`: auto (the default), required or off. `required` needs a provider by issuer: the
    /// pushed authorization request endpoint comes from its discovery document.
    func decodePushedAuthorization(_ reader: YAMLMappingReader, discovered: Bool, problems: inout ConfigProblemList) -> PushedAuthorizationMode {
        let mode = reader.parsed("par", expected: "auto, required or off", problems: &problems) {
            ConfigValueParsing.choice($0, as: PushedAuthorizationMode.self)
        } ?? .auto
        if mode == .required, !discovered {
            problems.add(path.child("par"), "required needs a provider configured by issuer: the pushed authorization "
                + "request endpoint comes from its discovery document", line: reader.line(of: "par"))
        }
        return mode
    }
}
