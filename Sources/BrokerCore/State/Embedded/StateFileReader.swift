import BrokerCrypto

/// A damaged or unreadable state file: which file, where, and why. Never silently dropped.
public struct StateLoadError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let offset: Int
    public let reason: String
    /// False when the file is intact but no configured key opens it: setting it aside would
    /// only hide sessions a correct key can read.
    public var isDamage = true

    public var description: String { "\(path) at offset \(offset): \(reason)" }
}

/// What reading one state file found.
struct StateFileScan: Sendable {
    let header: StateFileHeader
    var frames = 0
    var records = 0
    /// A journal's last frame, cut short by the end of the file: a crash interrupted its write,
    /// before the sync that precedes any acknowledgement. Dropped.
    var tornTail: (offset: Int, size: Int)?
}

extension StateFileHeader: @unchecked Sendable {}

enum StateFileReader {
    /// Reads `path`, handing every record to `apply` in order.
    static func read(_ path: String, kind: StateFileHeader.Kind, keys: StateKeys, apply: (StateRecord) -> Void) throws(StateLoadError) -> StateFileScan {
        func problem(_ offset: Int, _ reason: String) -> StateLoadError {
            StateLoadError(path: path, offset: offset, reason: reason)
        }
        let file: SequentialFile
        do {
            file = try SequentialFile(path)
        } catch {
            throw problem(0, error.description)
        }
        func next(_ count: Int) throws(StateLoadError) -> ArraySlice<UInt8> {
            do {
                return try file.read(count)
            } catch {
                throw problem(file.offset, error.description)
            }
        }
        do {
            let headerBytes = Array(try next(StateFileHeader.size))
            let header: StateFileHeader
            do throws(StateFileProblem) {
                header = try StateFileHeader.parse(headerBytes, expected: kind)
            } catch {
                throw problem(error.offset, error.reason)
            }
            guard let key = keys.key(id: header.keyID) else {
                var missing = problem(8, "the file is encrypted with key \(StateKeys.hex(id: header.keyID)), which is not among the configured state keys")
                missing.isDamage = false
                throw missing
            }
            var scan = StateFileScan(header: header)
            var scopes = ScopeTable() // one for the file: its sessions share their scope lists
            var sawEnd = false
            let prefixSize = FrameLayout.prefixSize(version: header.version)
            while true {
                let frameOffset = file.offset
                let prefix = try next(prefixSize)
                if prefix.isEmpty { break }
                guard !sawEnd else { throw problem(frameOffset, "data follows the snapshot's end marker") }
                // A whole prefix whose check fails is damage; a prefix cut short by the end of the
                // file has no length to check.
                var length: Int?
                if prefix.count == prefixSize {
                    guard let sealed = FrameLayout.sealedLength(prefix: prefix, version: header.version) else {
                        throw problem(frameOffset, "frame \(scan.frames)'s length fails its checksum: the file is damaged")
                    }
                    guard sealed >= FrameLayout.tag, sealed <= FrameLayout.maxSealed else {
                        throw problem(frameOffset, "frame \(scan.frames) has an impossible length")
                    }
                    length = sealed
                }
                guard let length, frameOffset + prefixSize + length <= file.size else {
                    // The end of the file cuts this frame short: in a journal, the last write, which
                    // a crash interrupted before its sync, so before anything in it was acknowledged.
                    if kind == .journal {
                        scan.tornTail = (frameOffset, file.size - frameOffset)
                        break
                    }
                    throw problem(frameOffset, "the file is truncated inside frame \(scan.frames)")
                }
                let type = prefix[prefix.startIndex + 4]
                let nonce = Array(prefix.suffix(12))
                let sealed = try next(length)
                let plaintext: [UInt8]
                do throws(CryptoError) {
                    plaintext = try FrameLayout.open(nonce: nonce, sealed: sealed, type: type, index: UInt64(scan.frames), header: headerBytes, key: key)
                } catch {
                    throw problem(frameOffset, "frame \(scan.frames) fails authentication: the file is damaged")
                }
                switch FrameType(rawValue: type) {
                case .records:
                    do throws(StateDecodingError) {
                        try StateRecord.decodeAll(plaintext[...], scopes: &scopes) { record in
                            scan.records += 1
                            apply(record)
                        }
                    } catch {
                        throw problem(frameOffset, "frame \(scan.frames) holds a record this broker cannot read (\(error.description))")
                    }
                case .end:
                    let count = plaintext.count == 8 ? Int(BigEndian.read(plaintext, at: 0, width: 8)) : -1
                    guard count == scan.records else {
                        throw problem(frameOffset, "the snapshot's end marker counts \(count) records, the file holds \(scan.records)")
                    }
                    sawEnd = true
                case nil:
                    throw problem(frameOffset, "frame \(scan.frames) has an unknown type \(type)")
                }
                scan.frames += 1
            }
            if kind == .snapshot && !sawEnd {
                throw problem(file.size, "the snapshot is truncated: its end marker is missing")
            }
            return scan
        }
    }
}
