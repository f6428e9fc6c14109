// libFuzzer entry points. One binary holds every Swift target; which one runs is chosen once,
// in LLVMFuzzerInitialize, from FUZZ_TARGET or from the name the binary was started under
// (`fuzz-json` → `json`; Fuzz/Makefile makes those symlinks).
//
// FUZZ_EMIT_SEEDS=DIR makes the binary write the seed corpus of the chosen target into DIR
// (made with the broker's own encoders and the fixed test keys) and exit.
import Foundation

struct FuzzTarget {
    let name: String
    let run: ([UInt8]) -> Void
    let seeds: () -> [(String, [UInt8])]
}

let allTargets: [FuzzTarget] = [formTarget, jsonTarget, configTarget, stateTarget, idTokenTarget, jwksTarget, forwardedTarget]

nonisolated(unsafe) var selectedTarget: FuzzTarget?

@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    var name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? ""
    if name.isEmpty, let first = argv.pointee?.pointee {
        name = URL(fileURLWithPath: String(cString: first)).lastPathComponent
    }
    if name.hasPrefix("fuzz-") { name.removeFirst(5) }
    guard let target = allTargets.first(where: { $0.name == name }) else {
        let names = allTargets.map(\.name).joined(separator: ", ")
        FileHandle.standardError.write(Data("broker-fuzz: set FUZZ_TARGET to one of: \(names) (or run it as fuzz-NAME)\n".utf8))
        exit(2)
    }
    selectedTarget = target
    if let directory = ProcessInfo.processInfo.environment["FUZZ_EMIT_SEEDS"] {
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let seeds = target.seeds()
        for (file, bytes) in seeds {
            _ = FileManager.default.createFile(atPath: "\(directory)/\(file)", contents: Data(bytes))
        }
        print("broker-fuzz: wrote \(seeds.count) seeds of \(target.name) to \(directory)")
        exit(0)
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    selectedTarget!.run(bytes)
    return 0
}

/// A failed invariant: a real finding (abort, so libFuzzer keeps the input as a crash).
func invariant(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() {
        FileHandle.standardError.write(Data("broker-fuzz invariant violated: \(message())\n".utf8))
        abort()
    }
}

/// Runs async code to completion from the fuzzer's synchronous callback.
final class ResultBox<T>: @unchecked Sendable { var value: T? }

func runBlocking<T>(_ body: @escaping @Sendable () async -> T) -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        box.value = await body()
        done.signal()
    }
    done.wait()
    return box.value!
}

/// Unpadded base64url.
func base64URL(_ bytes: some Sequence<UInt8>) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// The main package's root, for the test vectors it keeps (Tests/BrokerCoreTests/Resources).
let mainPackageRoot: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

func mainPackageFile(_ relativePath: String) -> [UInt8]? {
    (try? Data(contentsOf: mainPackageRoot.appendingPathComponent(relativePath))).map { Array($0) }
}

/// Seeds from text.
func textSeeds(_ prefix: String, _ texts: [String]) -> [(String, [UInt8])] {
    texts.enumerated().map { (String(format: "%@-%02d", prefix, $0.offset), Array($0.element.utf8)) }
}
