import Foundation
import Yams

extension ProviderDecoder {
    /// A provider's endpoints as configured, and the `userinfo_endpoint` that overrides a
    /// discovered one.
    struct ResolvedEndpoints {
        var endpoints: ProviderEndpoints
        var userinfoOverride: URL?
    }

    /// The endpoints from the entry's keys, over the preset's where there is one: `issuer` replaces
    /// the preset's endpoints; with a discovery preset, `authorization_endpoint` or
    /// `token_endpoint` switch to explicit endpoints (both then needed); with an explicit preset,
    /// each endpoint key replaces the preset's value. `userinfo_endpoint` may go with `issuer`.
    func decodeEndpoints(_ reader: YAMLMappingReader, preset: ProviderPreset?, values: [String: String],
                         allowInsecureHTTP: Bool, problems: inout ConfigProblemList) -> ResolvedEndpoints? {
        if reader.has("issuer") {
            let conflicting = Self.endpointKeys.filter { $0 != "userinfo_endpoint" && reader.has($0) }
            guard conflicting.isEmpty else {
                problems.add(path.child(conflicting[0]), "use either issuer (OIDC discovery) or explicit "
                    + "endpoints (authorization_endpoint, token_endpoint, ...), not both; only userinfo_endpoint "
                    + "may go with issuer", line: reader.line(of: conflicting[0]))
                return nil
            }
            let issuer = url(reader, "issuer", allowInsecureHTTP: allowInsecureHTTP, allowQuery: false, problems: &problems)
            return issuer.map { discovery($0, reader, allowInsecureHTTP: allowInsecureHTTP, problems: &problems) }
        }
        let userChoseExplicit = reader.has("authorization_endpoint") || reader.has("token_endpoint")
        switch preset?.endpoints {
        case .discovery(let template)? where !userChoseExplicit:
            guard let preset, let issuer = presetURL(template, key: "issuer", preset: preset, values: values,
                                                     allowQuery: false, problems: &problems) else { return nil }
            return discovery(issuer, reader, allowInsecureHTTP: allowInsecureHTTP, problems: &problems)
        case .configuredIssuer(let example)? where !userChoseExplicit:
            problems.add(path.child("issuer"), "required key is missing: preset \(preset?.name ?? "") needs the "
                + "issuer of your server, such as \(example)", line: line)
            return nil
        case .explicit?:
            guard let preset else { return nil }
            return explicit(reader, preset: preset, values: values, allowInsecureHTTP: allowInsecureHTTP, problems: &problems)
        default:
            return explicit(reader, preset: nil, values: [:], allowInsecureHTTP: allowInsecureHTTP, problems: &problems)
        }
    }

    private func discovery(_ issuer: URL, _ reader: YAMLMappingReader, allowInsecureHTTP: Bool,
                           problems: inout ConfigProblemList) -> ResolvedEndpoints {
        let userinfo = url(reader, "userinfo_endpoint", allowInsecureHTTP: allowInsecureHTTP, problems: &problems)
        return ResolvedEndpoints(endpoints: .discovery(issuer: issuer), userinfoOverride: userinfo)
    }

    /// Explicit endpoints: the entry's keys, each falling back to the preset's template.
    private func explicit(_ reader: YAMLMappingReader, preset: ProviderPreset?, values: [String: String],
                          allowInsecureHTTP: Bool, problems: inout ConfigProblemList) -> ResolvedEndpoints? {
        let templates = preset?.endpoints.templates ?? [:]
        guard !templates.isEmpty || Self.endpointKeys.contains(where: reader.has) else {
            problems.add(path, "missing endpoints: set issuer (OIDC discovery) or authorization_endpoint "
                + "and token_endpoint, or use a preset (\(ProviderPreset.names.joined(separator: ", ")))", line: line)
            return nil
        }
        for key in ["authorization_endpoint", "token_endpoint"] where !reader.has(key) && templates[key] == nil {
            problems.add(path.child(key), "required key is missing (explicit endpoints need "
                + "authorization_endpoint and token_endpoint; or use issuer for OIDC discovery)", line: line)
        }
        var found: [String: URL] = [:]
        for key in Self.endpointKeys {
            if reader.has(key) {
                found[key] = url(reader, key, allowInsecureHTTP: allowInsecureHTTP, problems: &problems)
            } else if let template = templates[key], let preset {
                found[key] = presetURL(template, key: key, preset: preset, values: values, problems: &problems)
            }
        }
        guard let authorization = found["authorization_endpoint"], let token = found["token_endpoint"] else { return nil }
        return ResolvedEndpoints(endpoints: .explicit(ExplicitEndpoints(
            authorization: authorization, token: token, revocation: found["revocation_endpoint"],
            userinfo: found["userinfo_endpoint"], jwks: found["jwks_uri"])))
    }

    /// The URL under `key`, checked by ``ConfigURLRules``; `nil` when absent or invalid (recorded).
    func url(_ reader: YAMLMappingReader, _ key: String, allowInsecureHTTP: Bool, allowQuery: Bool = true,
             problems: inout ConfigProblemList) -> URL? {
        reader.parsed(key, expected: "a URL", problems: &problems) {
            ConfigURLRules.parse($0, allowInsecureHTTP: allowInsecureHTTP, allowQuery: allowQuery)
        }
    }

    /// A preset's template with its placeholders filled, as a URL.
    private func presetURL(_ template: String, key: String, preset: ProviderPreset, values: [String: String],
                           allowQuery: Bool = true, problems: inout ConfigProblemList) -> URL? {
        let result = PresetPlaceholder.fill(template, with: values).map {
            ConfigURLRules.parse($0, allowInsecureHTTP: false, allowQuery: allowQuery)
        } ?? .failure(ConfigValueError("has a placeholder with no value"))
        return problems.check(result.mapError {
            ConfigValueError("preset \(preset.name) gives no usable \(key) (\(template)): \($0.message)")
        }, at: path, line: line)
    }
}
