import APIClient
import Foundation
import Yams

/// Decodes one entry of the `providers` section. With `preset:`, the preset supplies every value
/// the entry leaves out (see `ProviderDecoder+Preset.swift`); endpoints are resolved in
/// `ProviderDecoder+Endpoints.swift`.
struct ProviderDecoder {
    let id: String
    let path: ConfigKeyPath
    /// The line of the provider's id.
    let line: Int?
    let environment: [String: String]
    let baseDirectory: String?

    static let endpointKeys = ["authorization_endpoint", "token_endpoint", "revocation_endpoint",
                               "userinfo_endpoint", "jwks_uri"]
    static let knownKeys = ["preset", "issuer"] + endpointKeys + ProviderPreset.placeholderKeys + [
        "client_id", "client_secret_env", "client_secret_file", "scopes",
        "token_endpoint_auth_method", "authorization_params", "allow_insecure_http",
        "api_base_url", "api_headers", "api_allow_private_addresses", "api_connections", "ca_file", "display_name", "par", "dpop",
    ] + privateKeyJWTKeys

    /// The provider, or `nil` when anything about it is wrong (every problem is recorded).
    func decode(_ node: Node, problems: inout ConfigProblemList) -> ProviderConfig? {
        let before = problems.problems.count
        guard let reader = YAMLMappingReader(node, at: path, known: Self.knownKeys,
                                         forbidden: ["client_secret": SecretReference.inlineRefusal],
                                         problems: &problems) else { return nil }
        let insecure = reader.parsed("allow_insecure_http", expected: "true or false", problems: &problems,
                                     ConfigValueParsing.boolean) ?? false
        let choice = decodePreset(reader, problems: &problems)
        let preset = choice.preset
        let resolved = choice.failed ? nil : decodeEndpoints(reader, preset: preset, values: choice.values,
                                                             allowInsecureHTTP: insecure, problems: &problems)
        let clientID = reader.string("client_id", problems: &problems)
        if !reader.has("client_id") {
            problems.add(path.child("client_id"), "required key is missing", line: line)
        }
        let scopes = decodeScopes(reader, problems: &problems) ?? preset?.defaultScopes
            ?? (resolved?.endpoints.issuer != nil ? ["openid"] : [])
        let method = reader.parsed("token_endpoint_auth_method", expected: "a method", problems: &problems) {
            ConfigValueParsing.choice($0, as: TokenEndpointAuthMethod.self)
        } ?? preset?.tokenEndpointAuthMethod ?? .clientSecretBasic
        let discovered = resolved?.endpoints.issuer != nil
        let authentication = decodeClientAuthentication(reader, method: method, discovered: discovered, problems: &problems)
        let pushedAuthorization = decodePushedAuthorization(reader, discovered: discovered, problems: &problems)
        let dpop = reader.parsed("dpop", expected: "auto, required or off", problems: &problems) {
            ConfigValueParsing.choice($0, as: ProviderDPoPMode.self)
        } ?? .auto
        let parameters = (preset?.authorizationParameters ?? [:])
            .merging(decodeParameters(reader, problems: &problems)) { _, configured in configured }
        let api = decodeAPI(reader, preset: preset, allowInsecureHTTP: insecure, problems: &problems)
        let caFile = decodeCAFile(reader, problems: &problems)
        let displayName = reader.displayName(problems: &problems)
        guard problems.problems.count == before, let resolved, let clientID, let authentication else { return nil }
        return ProviderConfig(id: id, endpoints: resolved.endpoints, clientID: clientID, clientAuthentication: authentication,
                              scopes: scopes, authorizationParameters: parameters,
                              pushedAuthorization: pushedAuthorization, dpop: dpop, allowInsecureHTTP: insecure,
                              preset: preset?.name, userinfoEndpointOverride: resolved.userinfoOverride,
                              profileMapping: preset?.profileMapping ?? .openIDConnect,
                              userinfoMethod: preset?.userinfoMethod ?? "GET",
                              scopeSeparator: preset?.scopeSeparator ?? " ", apiBaseURL: api.baseURL,
                              apiHeaders: api.headers, apiAllowPrivateAddresses: api.allowPrivateAddresses,
                              apiConnections: api.connections, caFile: caFile, displayName: displayName)
    }

    /// The API proxy's settings: `api_base_url` (else the preset's; no query or fragment),
    /// `api_headers` (else the preset's; header names the proxy would drop anyway are refused),
    /// `api_allow_private_addresses`, `api_connections`.
    private func decodeAPI(_ reader: YAMLMappingReader, preset: ProviderPreset?, allowInsecureHTTP: Bool, problems: inout ConfigProblemList)
        -> (baseURL: URL?, headers: [String], allowPrivateAddresses: Bool, connections: APIConnections) {
        var baseURL: URL?
        if reader.has("api_base_url") {
            baseURL = url(reader, "api_base_url", allowInsecureHTTP: allowInsecureHTTP, allowQuery: false, problems: &problems)
        } else if let template = preset?.apiBaseURL {
            baseURL = URL(string: template)
        }
        var headers = preset?.apiHeaders ?? []
        if let items = reader.stringList("api_headers", problems: &problems) {
            headers = []
            for item in items {
                if let refusal = ProxyHeaders.refusal(ofExtra: item.text) {
                    problems.add(item.path, refusal, line: item.line)
                } else if !headers.contains(where: { $0.lowercased() == item.text.lowercased() }) {
                    headers.append(item.text)
                }
            }
        }
        let allowPrivate = reader.parsed("api_allow_private_addresses", expected: "true or false", problems: &problems,
                                         ConfigValueParsing.boolean) ?? false
        let connections = reader.parsed("api_connections", expected: "shared or per_session", problems: &problems) {
            ConfigValueParsing.choice($0, as: APIConnections.self)
        } ?? .shared
        return (baseURL, headers, allowPrivate, connections)
    }

    /// `ca_file`: a PEM file of certificate authorities, relative to the configuration's
    /// directory, read now so that a missing or unreadable one is a problem naming its path.
    private func decodeCAFile(_ reader: YAMLMappingReader, problems: inout ConfigProblemList) -> String? {
        guard let written = reader.string("ca_file", problems: &problems) else { return nil }
        let path = SecretReference.absolutePath(written, baseDirectory: baseDirectory)
        do throws(CertificateAuthoritiesError) {
            _ = try CertificateAuthorities(adding: path)
        } catch {
            problems.add(self.path.child("ca_file"), error.description, line: reader.line(of: "ca_file"))
            return nil
        }
        return path
    }

    func decodeSecret(_ reader: YAMLMappingReader, problems: inout ConfigProblemList) -> Secret? {
        switch reader.secretReference("client_secret", problems: &problems) {
        case .absent:
            if reader.refusedKeys.isEmpty {
                problems.add(path.child("client_secret_env"), "required key is missing: set client_secret_env "
                    + "(an environment variable's name) or client_secret_file (a file's path)", line: line)
            }
            return nil
        case .invalid:
            return nil
        case .found(let reference, let key):
            let resolved = reference.resolve(environment: environment, baseDirectory: baseDirectory)
            return problems.check(resolved, at: path.child(key), line: reader.line(of: key))
        }
    }

    private func decodeScopes(_ reader: YAMLMappingReader, problems: inout ConfigProblemList) -> [String]? {
        guard let items = reader.stringList("scopes", problems: &problems) else { return nil }
        var scopes: [String] = []
        for item in items {
            // RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
            let valid = !item.text.isEmpty && item.text.unicodeScalars.allSatisfy {
                $0.value == 0x21 || (0x23...0x5B).contains($0.value) || (0x5D...0x7E).contains($0.value)
            }
            if !valid {
                problems.add(item.path, "invalid scope \(ConfigValueParsing.quoted(item.text)): a scope has no spaces, "
                    + "quotes or backslashes (RFC 6749 §3.3); list each scope separately", line: item.line)
            } else if scopes.contains(item.text) {
                problems.add(item.path, "duplicate scope \(ConfigValueParsing.quoted(item.text))", line: item.line)
            } else {
                scopes.append(item.text)
            }
        }
        return scopes
    }

    private func decodeParameters(_ reader: YAMLMappingReader, problems: inout ConfigProblemList) -> [String: String] {
        guard let node = reader.node("authorization_params"),
              let params = YAMLMappingReader(node, at: path.child("authorization_params"), known: nil, problems: &problems)
        else { return [:] }
        var result: [String: String] = [:]
        for name in params.keys {
            if ProviderConfig.reservedAuthorizationParameters.contains(name) {
                problems.add(params.path.child(name), "is set by the broker and cannot be overridden",
                             line: params.line(of: name))
            } else if let value = params.scalar(name, expected: "a string", problems: &problems) {
                result[name] = value
            }
        }
        return result
    }
}
