import BrokerCrypto
import Foundation
import WireValues

/// Bench-only: builds a state directory holding many live sessions, through the broker's own
/// code — sessions made as `POST /token` makes them, kept in a `SessionTable`, written by
/// `SnapshotWriter` as generation 1 — so that a broker started on the directory loads them as it
/// would after a restart. Nothing in the served API is involved. Used by `broker-bench-state`
/// (docs/benchmark.md); the broker itself never calls it, and it is `package`: no API of the
/// BrokerCore library.
///
/// Each session looks like one the development provider makes: provider `dev`, app `demo`,
/// subject `dev-userNNNNNNN`, scopes `openid profile email`, a 39-character access token
/// (`dev_at_` + 24 random bytes, base64url) valid for `accessTokenLifetime` seconds (hours by
/// default, so `GET /token` answers from memory), a 39-character refresh token (`dev_rt_` + 24
/// random bytes), and ID-token claims JSON shaped like the development provider's (about 230
/// bytes: `iss`, `sub`, `aud`, `exp`, `iat`, `nonce`, `name`, `email`, `email_verified`). The
/// refresh tokens are unknown to any provider: these sessions answer `GET /token` but cannot be
/// refreshed.
package enum StateFixture {
    /// What was written.
    package struct Summary: Sendable {
        /// Sessions in the snapshot.
        package let sessions: Int
        /// Size of `snapshot.tbs`.
        package let snapshotBytes: Int
        /// Per session: the session-token hash (32 bytes) plus the access and refresh tokens'
        /// characters — the "token bytes themselves".
        package let tokenBytesPerSession: Int
        /// Per session: every stored field's bytes (token bytes, subject, provider, app, scopes,
        /// claims JSON, three 8-byte times).
        package let payloadBytesPerSession: Int
        /// Time to build the sessions in the store.
        package let buildSeconds: Double
        /// Time `SnapshotWriter` took (encrypt, write, fsync, rename).
        package let writeSeconds: Double
    }

    /// Why the fixture could not be written.
    package struct Failure: Error, Sendable, CustomStringConvertible {
        package let description: String
    }

    /// Writes `count` live sessions to `directory` (which must hold no state yet) as
    /// `snapshot.tbs`, encrypted with the first key of `stateKey` (the `BROKER_STATE_KEY` form),
    /// and the plaintext session tokens, one a line, to `tokensFile`.
    package static func writeSessions(
        count: Int, provider: String = "dev", app: String = "demo", directory: String, stateKey: String,
        tokensFile: String, issuer: String = "http://127.0.0.1:8080/dev",
        accessTokenLifetime: Double = 12 * 3600, now: Double? = nil
    ) throws(Failure) -> Summary {
        let now = now ?? Date().timeIntervalSince1970
        guard count >= 0 else { throw Failure(description: "count must not be negative") }
        let keys: StateKeys
        switch StateKeys.parse(stateKey) {
        case .success(let parsed): keys = parsed
        case .failure(let problem): throw Failure(description: "the state key \(problem.message)")
        }
        do {
            try StateFileIO.createDirectory(directory)
        } catch {
            throw Failure(description: error.description)
        }
        let existing = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        if let found = existing.first(where: { $0.hasPrefix("snapshot.") || $0.hasPrefix("journal-") }) {
            throw Failure(description: "\(directory) already holds state (\(found)); give an empty directory")
        }
        guard FileManager.default.createFile(atPath: tokensFile, contents: nil) else {
            throw Failure(description: "cannot create \(tokensFile)")
        }
        guard let tokensOut = FileHandle(forWritingAtPath: tokensFile) else {
            throw Failure(description: "cannot open \(tokensFile) for writing")
        }
        defer { try? tokensOut.close() }

        let buildStarted = ContinuousClock.now
        // The sweeper's rules decide liveness, but nothing here sweeps: a store without lifetimes.
        let store = SessionTable(log: NoChangeLog(), lifetimes: SessionLifetimes(idle: .infinity, absolute: .infinity))
        let scopes = ["openid", "profile", "email"]
        var lines: [UInt8] = []
        lines.reserveCapacity(min(count, 1 << 16) * 50)
        var tokenBytes = 0
        var payloadBytes = 0
        for index in 0..<count {
            let token = OpaqueToken.make(prefix: OpaqueToken.sessionPrefix)
            let user = "user" + String(index).leftPadded(to: 7)
            let subject = "dev-" + user
            let claims = #"{"iss":"\#(issuer)","sub":"\#(subject)","aud":"dev-client","exp":\#(Int(now) + 600),"#
                + #""iat":\#(Int(now)),"nonce":"\#(Base64URL.encode(SecureRandom.bytes(count: 32)))","#
                + #""name":"\#(user)","email":"\#(user)@example.test","email_verified":true}"#
            // As a sign-in keeps them (``IDTokenClaims/kept``).
            let kept = IDTokenClaims.kept((try? JSONValue.parse(Array(claims.utf8))) ?? .null)
            let session = Session(
                id: OpaqueToken.hash(token), provider: provider, app: app, subject: subject, scopes: scopes,
                accessToken: "dev_at_" + Base64URL.encode(SecureRandom.bytes(count: 24)),
                accessTokenExpiresAt: now + accessTokenLifetime,
                refreshToken: "dev_rt_" + Base64URL.encode(SecureRandom.bytes(count: 24)),
                idTokenClaims: kept, createdAt: now, signedInAt: now, usedAt: now
            )
            _ = store.put(session)
            if index == 0 {
                tokenBytes = SHA256Digest.byteCount + session.accessToken.utf8.count + (session.refreshToken?.utf8.count ?? 0)
                payloadBytes = tokenBytes + subject.utf8.count + provider.utf8.count + app.utf8.count
                    + scopes.reduce(0) { $0 + $1.utf8.count } + kept.count + 3 * 8
            }
            lines += token.utf8
            lines.append(UInt8(ascii: "\n"))
            if lines.count >= 1 << 20 {
                tokensOut.write(Data(lines))
                lines.removeAll(keepingCapacity: true)
            }
        }
        tokensOut.write(Data(lines))
        let buildSeconds = (ContinuousClock.now - buildStarted).seconds

        let writeStarted = ContinuousClock.now
        let shards = store.capture()
        let written: (records: Int, bytes: Int)
        do {
            written = try SnapshotWriter.write(directory: directory, generation: 1, keys: keys, parts: shards.count) { part, emit in
                for stored in shards[part].values { emit(.session(stored.session)) }
            }
        } catch {
            throw Failure(description: error.description)
        }
        return Summary(
            sessions: written.records, snapshotBytes: written.bytes, tokenBytesPerSession: tokenBytes,
            payloadBytesPerSession: payloadBytes, buildSeconds: buildSeconds,
            writeSeconds: (ContinuousClock.now - writeStarted).seconds
        )
    }
}

private extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
