import Foundation
import Synchronization
import TestWaiting

/// The real `token-broker` binary, started as a child process on a free port.
final class BrokerProcess: Sendable {
    let process: Process
    let port: UInt16
    private let output: LineBuffer
    private let reading = OutputReading()
    private let directory: URL

    /// The built `token-broker` beside the test bundle (or `$TOKEN_BROKER_BINARY`).
    static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["TOKEN_BROKER_BINARY"] {
            return URL(fileURLWithPath: path)
        }
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("token-broker").path),
              directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("token-broker")
    }

    /// A state key for test brokers (32 random bytes, base64).
    static let stateKey = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()

    /// Starts the broker with `config` (YAML) and waits until it logs that it listens.
    init(config: String = "", arguments: [String] = [], environment: [String: String] = [:]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("broker-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let configFile = directory.appendingPathComponent("broker.yaml")
        try config.write(to: configFile, atomically: true, encoding: .utf8)

        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["serve", "--config", configFile.path, "--listen", "127.0.0.1:0"] + arguments
        var childEnvironment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("BROKER_") }
        childEnvironment["BROKER_LOG_FORMAT"] = "json"
        childEnvironment["BROKER_STATE_DIR"] = directory.appendingPathComponent("state").path
        childEnvironment["BROKER_STATE_KEY"] = Self.stateKey
        // Tests stop brokers with SIGTERM all the time; the ones about the delay set their own.
        childEnvironment["BROKER_SHUTDOWN_DELAY_SECONDS"] = "0"
        childEnvironment.merge(environment) { $1 }
        process.environment = childEnvironment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let output = LineBuffer()
        let listening = LineWaiter()
        let reader = pipe.fileHandleForReading
        Thread.detachNewThread { [reading] in
            var pending = Data()
            while reading.mayRead() {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    output.append(line)
                    listening.offer(line)
                }
            }
            if reading.closing {
                try? reader.close()
                reading.set(.closed)
            }
            output.end()
            listening.offer(nil)
        }
        try process.run()
        self.process = process
        self.output = output
        guard let line = listening.wait(seconds: 30),
              let json = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let address = json["address"] as? String,
              let port = address.split(separator: ":").last.flatMap({ UInt16($0) })
        else {
            process.terminate()
            throw RawHTTPError(description: "the broker did not start: \(output.lines.joined(separator: "\n"))")
        }
        self.port = port
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Every line the broker printed so far.
    var lines: [String] { output.lines }

    /// The printed lines that parse as JSON objects.
    var jsonLines: [[String: Any]] {
        lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// Stops reading the broker's output (after the chunk being read, if any): its stdout, a pipe
    /// nobody drains, fills up and blocks its writes.
    func pauseOutput() { reading.set(.paused) }

    /// Reads the broker's output again, from where it stopped.
    func resumeOutput() { reading.set(.reading) }

    /// Closes the reading end of the broker's output, as a reader that went away does (`| head`),
    /// after the chunk being read, if any: see `outputClosed`.
    func closeOutput() { reading.set(.closing) }

    /// Whether `closeOutput` has closed the output's reading end.
    var outputClosed: Bool { reading.isClosed }

    func signal(_ number: Int32) {
        kill(process.processIdentifier, number)
    }

    /// Waits for the process to exit and for its last line to be read; nil when it is still
    /// running after `seconds`.
    func waitForExit(seconds: Double) -> Int32? {
        try? waitUntilBlocking("the broker exits", seconds: seconds) { !process.isRunning && output.ended }
        return process.isRunning ? nil : process.terminationStatus
    }

    func get(_ target: String, headers: [String: String] = [:]) throws -> RawHTTPResponse {
        try RawHTTP.request(port: port, target: target, headers: headers)
    }
}

/// The lines a process printed, collected by a reader thread.
final class LineBuffer: Sendable {
    private let stored = Mutex<(lines: [String], ended: Bool)>(([], false))

    func append(_ line: String) { stored.withLock { $0.lines.append(line) } }
    /// The process's output reached its end: every line it printed is in `lines`.
    func end() { stored.withLock { $0.ended = true } }
    var lines: [String] { stored.withLock { $0.lines } }
    var ended: Bool { stored.withLock { $0.ended } }
}

/// Whether the reader thread reads the broker's output: a test pauses it to block the broker's
/// stdout, or has it close the pipe.
final class OutputReading: Sendable {
    enum Mode { case reading, paused, closing, closed }
    private let mode = Mutex(Mode.reading)

    func set(_ new: Mode) { mode.withLock { $0 = new } }
    var closing: Bool { mode.withLock { $0 == .closing } }
    var isClosed: Bool { mode.withLock { $0 == .closed } }

    /// True once the reader may read; false once it is to close the output.
    func mayRead() -> Bool {
        while true {
            switch mode.withLock({ $0 }) {
            case .reading: return true
            case .closing, .closed: return false
            case .paused: usleep(1_000)
            }
        }
    }
}

/// Hands the first log line that says "listening" (or the end of output) to a waiting test.
final class LineWaiter: Sendable {
    private let state = Mutex<(line: String?, done: Bool)>((nil, false))

    func offer(_ line: String?) {
        state.withLock { state in
            guard !state.done else { return }
            if let line, !line.contains(#""msg":"listening""#) { return }
            state = (line, true)
        }
    }

    func wait(seconds: Double) -> String? {
        try? waitUntilBlocking("the broker says it is listening", seconds: seconds) { state.withLock { $0.done } }
        return state.withLock { $0.line }
    }
}
