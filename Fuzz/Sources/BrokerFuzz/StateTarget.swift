// The state files: snapshot and journal decoding (BrokerCore/State), reached through
// `@testable import` (the fuzz build compiles the main package with -enable-testing).
//
// The first input byte picks a mode; the rest is:
//   mode 0  a frame's plaintext, handed to StateRecord.decodeAll directly;
//   mode 1  the same plaintext, sealed with the fixed test key as the records frame of a
//           journal, read back by StateFileReader (so the decoder runs behind real AES-GCM);
//   mode 2  the same, as a snapshot with its end marker (the right record count, or an off-by-one
//           one when bit 2 of the mode byte is set);
//   mode 3  raw bytes after a valid header (journal, or snapshot when bit 2 is set): frame
//           lengths, torn tails, authentication failures, end markers.
// Invariants: records that decode re-encode to bytes that decode to the same bytes again; a torn
// tail is only ever the end of the file, and it ends no record that was read.
import BrokerCrypto
import Foundation
@testable import BrokerCore

private let fuzzKey = try! SymmetricKey(bytes: Array(0..<32))
private let fuzzKeys = StateKeys(current: fuzzKey)
private let scratchDirectory: String = {
    let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    let path = "\(base)/broker-fuzz-state-\(getpid())"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    atexit { try? FileManager.default.removeItem(atPath: "\(scratchDirectoryPathForExit)") }
    scratchDirectoryPathForExit = path
    return path
}()
nonisolated(unsafe) private var scratchDirectoryPathForExit = ""

private func header(_ kind: StateFileHeader.Kind) -> [UInt8] {
    StateFileHeader(kind: kind, keyID: fuzzKeys.currentID, generation: 7, createdAt: 1_700_000_000).bytes
}

private func encodeAll(_ records: [StateRecord]) -> [UInt8] {
    var out: [UInt8] = []
    for record in records { record.encode(into: &out) }
    return out
}

private func decodeAll(_ bytes: [UInt8]) -> [StateRecord]? {
    var records: [StateRecord] = []
    var scopes = ScopeTable()
    do {
        try StateRecord.decodeAll(bytes[...], scopes: &scopes) { records.append($0) }
    } catch {
        _ = String(describing: error)
        return nil
    }
    return records
}

private func checkRoundTrip(_ records: [StateRecord]) {
    let once = encodeAll(records)
    guard let again = decodeAll(once) else {
        invariant(false, "re-encoded state records do not decode")
        return
    }
    invariant(encodeAll(again) == once, "state records change through encode + decode")
}

private func readFile(_ bytes: [UInt8], kind: StateFileHeader.Kind) {
    let path = "\(scratchDirectory)/\(kind == .snapshot ? "snapshot.tbs" : "journal-7.tbj")"
    _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
    var records: [StateRecord] = []
    do {
        let scan = try StateFileReader.read(path, kind: kind, keys: fuzzKeys) { records.append($0) }
        invariant(scan.records == records.count, "a scan counts \(scan.records) records but applied \(records.count)")
        if let torn = scan.tornTail {
            invariant(kind == .journal && torn.offset + torn.size == bytes.count, "a torn tail that does not end the file")
            let whole = FrameLayout.prefixSize(version: StateFileHeader.version) + FrameLayout.tag
            invariant(torn.size < whole || Int(BigEndian.read(bytes, at: torn.offset, width: 4)) + whole - FrameLayout.tag > torn.size,
                      "a torn tail that holds a whole frame")
        }
    } catch {
        _ = String(describing: error)
    }
    if !records.isEmpty { checkRoundTrip(records) }
}

let stateTarget = FuzzTarget(name: "state", run: { bytes in
    guard let mode = bytes.first else { return }
    let rest = Array(bytes.dropFirst())
    switch mode % 4 {
    case 0:
        if let records = decodeAll(rest) { checkRoundTrip(records) }
    case 1:
        let head = header(.journal)
        readFile(head + (try! FrameLayout.seal(rest, type: .records, index: 0, header: head, key: fuzzKey)), kind: .journal)
    case 2:
        let head = header(.snapshot)
        var count = UInt64(decodeAll(rest)?.count ?? 0)
        if mode & 4 != 0 { count &+= 1 }
        var end: [UInt8] = []
        BigEndian.append(count, to: &end, width: 8)
        readFile(head + (try! FrameLayout.seal(rest, type: .records, index: 0, header: head, key: fuzzKey))
                 + (try! FrameLayout.seal(end, type: .end, index: 1, header: head, key: fuzzKey)), kind: .snapshot)
    default:
        let kind: StateFileHeader.Kind = mode & 4 != 0 ? .snapshot : .journal
        readFile(header(kind) + rest, kind: kind)
    }
}, seeds: {
    let digest = { (n: UInt8) in SHA256Digest(bytes: Array(repeating: n, count: 32))! }
    let claims = Array(#"{"iss":"https://idp.example.test","sub":"u1","aud":"broker-client","exp":1700003600,"iat":1700000000,"nonce":"n"}"#.utf8)
    let session = Session(id: digest(1), provider: "dev", app: "demo", subject: "dev-user0000001",
                          scopes: ["openid", "profile", "email"], accessToken: "dev_at_abcdefghijklmnopqrstuvwxyz012",
                          accessTokenExpiresAt: 1_700_003_600, refreshToken: "dev_rt_abcdefghijklmnopqrstuvwxyz012",
                          idTokenClaims: claims, createdAt: 1_700_000_000, signedInAt: 1_699_999_990, usedAt: 1_700_000_100)
    let bare = Session(id: digest(2), provider: "p", app: "a", subject: "s", scopes: [], accessToken: "t",
                       accessTokenExpiresAt: nil, refreshToken: nil, idTokenClaims: nil, createdAt: 0, signedInAt: 0, usedAt: 0)
    let back = AppReturn(redirectURI: "http://127.0.0.1:9000/cb", state: "xyz", challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    let pending = PendingAuthorization(provider: "dev", app: "demo", purpose: .incremental(back, session: digest(3)), verifier: "v",
                                       nonce: "n", requestedScopes: ["openid"], expiresAt: 1_700_000_600, beganAt: 1_700_000_000,
                                       signInID: "0123456789ab")
    let devicePending = PendingAuthorization(provider: "dev", app: "tv", purpose: .device(digest(8)), verifier: "v",
                                             nonce: "n", requestedScopes: ["openid"], expiresAt: 1_700_000_600, beganAt: 1_700_000_000)
    let grant = Grant(provider: "dev", subject: "u1", scopes: ["openid"], accessToken: "at", accessTokenExpiresAt: 1_700_003_600,
                      refreshToken: "rt", idTokenClaims: claims, signedInAt: 1_700_000_010, signInID: "0123456789ab")
    // A code in each of its states: holding a grant, merged, redeemed (refused twice before), spent.
    let holding = Handoff(app: "demo", redirectURI: "http://127.0.0.1:9000/cb", appChallenge: "c", expiresAt: 1_700_000_060,
                          status: .holding(grant))
    let merged = Handoff(app: "demo", redirectURI: "r", appChallenge: "c", expiresAt: 1, status: .merged(into: digest(3), boundTo: "jkt-3", provider: "dev", providerBound: true))
    let redeemed = Handoff(app: "demo", redirectURI: "r", appChallenge: "c", expiresAt: 1, status: .redeemed(digest(4)), refusals: 2)
    let spent = Handoff(app: "demo", redirectURI: "r", appChallenge: "c", expiresAt: 1, status: .spent(.signedOut))
    let all: [StateRecord] = [.session(session), .session(bare), .sessionRemoved(digest(1)), .pending(digest(5), pending),
                              .pending(digest(9), devicePending), .pendingRemoved(digest(5)), .handoff(digest(6), holding),
                              .handoff(digest(7), merged), .handoff(digest(10), redeemed), .handoff(digest(11), spent)]
    var seeds: [(String, [UInt8])] = []
    for (index, record) in all.enumerated() {
        let bytes = encodeAll([record])
        seeds.append((String(format: "state-record-%02d", index), [0] + bytes))
    }
    let everything = encodeAll(all)
    seeds.append(("state-all-direct", [0] + everything))
    seeds.append(("state-all-journal", [1] + everything))
    seeds.append(("state-all-snapshot", [2] + everything))
    seeds.append(("state-unknown-kind", [0, 9, 3, 1, 1, 0] + encodeAll([.sessionRemoved(digest(8))])))
    // Mode 3: the bytes after the header of a real journal and of a real snapshot.
    let journalHead = header(.journal)
    let frame0 = try! FrameLayout.seal(everything, type: .records, index: 0, header: journalHead, key: fuzzKey)
    let frame1 = try! FrameLayout.seal(encodeAll([.sessionRemoved(digest(1))]), type: .records, index: 1, header: journalHead, key: fuzzKey)
    seeds.append(("state-raw-journal", [3] + frame0 + frame1))
    seeds.append(("state-raw-journal-torn", [3] + frame0 + frame1.dropLast(5)))
    var flippedLength = frame1
    flippedLength[2] ^= 0x01
    seeds.append(("state-raw-journal-flipped-length", [3] + frame0 + flippedLength))
    let snapshotHead = header(.snapshot)
    var end: [UInt8] = []
    BigEndian.append(UInt64(all.count), to: &end, width: 8)
    seeds.append(("state-raw-snapshot", [7] + (try! FrameLayout.seal(everything, type: .records, index: 0, header: snapshotHead, key: fuzzKey))
                  + (try! FrameLayout.seal(end, type: .end, index: 1, header: snapshotHead, key: fuzzKey))))
    return seeds
})
