extension ConfigDraft {
    /// Reads `admin.token_file` and checks the admin settings together: a token long enough,
    /// never the public listener without one, never a listener off loopback without one, and a
    /// listener of its own that is not the public one. Problems name the file, never its text.
    mutating func resolveAdminToken(environment: [String: String], baseDirectory: String?, file: String?) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        func problem(_ key: String, _ message: String) {
            let line = lines[key]
            problems.append(ConfigProblem(key: key, message: message, line: line, file: line == nil ? nil : file))
        }
        if let path = adminTokenFile {
            switch SecretReference.file(path).resolve(environment: environment, baseDirectory: baseDirectory) {
            case .success(let token) where token.reveal().count < AdminSettings.minimumTokenLength:
                problem("admin.token_file", "the admin token must be at least \(AdminSettings.minimumTokenLength) characters (`token-broker gen-key` makes one)")
            case .success(let token): adminToken = token
            case .failure(let error): problem("admin.token_file", error.message)
            }
        }
        if let listen = adminListen {
            if listen == self.listen || (listen.port == self.listen.port && listen.port != 0) {
                problem("admin.listen", "must not be the public listener (\(self.listen)); to serve the admin API there, "
                    + "leave admin.listen unset and set admin.token_file")
            } else if !listen.isLoopback && adminTokenFile == nil {
                problem("admin.listen", "an admin listener off loopback needs admin.token_file (a bearer token every admin call must carry)")
            } else if adminTokenFile == nil && !AdminSettings.tokenlessHosts.contains(listen.host) {
                problem("admin.listen", "without admin.token_file the admin listener must be 127.0.0.1, ::1 or localhost: "
                    + "it answers only requests whose Host is one of those (set admin.token_file to bind \(listen.host))")
            }
        }
        if adminMetricsOnly && adminListen == nil {
            problem("admin.metrics_only", "needs admin.listen: /metrics would be served nowhere")
        }
        if !adminTrustedProxies.isEmpty && adminListen == nil {
            problem("admin.trusted_proxies", "needs admin.listen: it applies to the admin listener only (server.trusted_proxies applies on the public one)")
        }
        return problems
    }

    /// The admin API's settings; nil when it is off.
    var admin: AdminSettings? {
        guard adminListen != nil || adminToken != nil else { return nil }
        return AdminSettings(listen: adminListen, token: adminToken, trustedProxies: adminTrustedProxies, metricsOnly: adminMetricsOnly)
    }
}
