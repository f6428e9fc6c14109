import BrokerCore
import Foundation
import Testing

struct ConfigListenAddressTests {
    @Test(arguments: [
        ("127.0.0.1:8080", "127.0.0.1", 8080, true),
        ("0.0.0.0:80", "0.0.0.0", 80, false),
        ("[::1]:8080", "::1", 8080, true),
        ("[::]:0", "::", 0, false),
        ("localhost:65535", "localhost", 65535, true),
        ("127.4.5.6:1", "127.4.5.6", 1, true),
        ("10.1.2.3:443", "10.1.2.3", 443, false),
        ("[2001:db8::1]:8443", "2001:db8::1", 8443, false),
    ])
    func parsesHostAndPort(text: String, host: String, port: Int, loopback: Bool) throws {
        let address = try ListenAddress(parsing: text)
        #expect(address.host == host)
        #expect(Int(address.port) == port)
        #expect(address.isLoopback == loopback)
        #expect(address.description == text)
        #expect(try ListenAddress(parsing: address.description) == address)
    }

    @Test(arguments: [
        ("127.0.0.1", "missing :PORT"),
        ("127.0.0.1:", "port must be a number from 0 to 65535"),
        ("127.0.0.1:65536", "port must be a number from 0 to 65535, got \"65536\""),
        ("127.0.0.1:-1", "port must be a number"),
        ("127.0.0.1:http", "port must be a number"),
        (":8080", "host must be an IP address or localhost"),
        ("example.com:80", "host must be an IP address or localhost, got \"example.com\""),
        ("1.2.3:80", "host must be an IP address"),
        ("::1:8080", "must be written in brackets"),
        ("[::1]8080", "missing :PORT after the address"),
        ("[::1:8080", "missing ]"),
        ("[127.0.0.1]:80", "is not an IPv6 address"),
        ("[fe80::1%eth0]:80", "is not an IPv6 address"),
    ])
    func refusesMalformedAddresses(text: String, expected: String) {
        do {
            let address = try ListenAddress(parsing: text)
            Issue.record("\(text) parsed as \(address)")
        } catch {
            #expect(error.problems.first?.key == "listen")
            #expect(error.problems.first?.message.contains(expected) == true, "\(text): \(error)")
        }
    }

    @Test func listenInTheFileIsCheckedWithItsLine() throws {
        expectProblem(problems(of: "server:\n  listen: \"[::1]:99999\"\n"), key: "server.listen",
                      contains: "port must be a number from 0 to 65535", line: 2)
        let config = try loadConfig("server:\n  listen: \"[::]:0\"\n")
        #expect(config.server.listen.port == 0)
        #expect(config.server.publicURL.absoluteString == "http://[::]:0")
    }

    @Test func logLevelsMatchSwiftLogNamesAndOrder() {
        #expect(LogLevel.allCases.map(\.rawValue) == ["trace", "debug", "info", "notice", "warning", "error", "critical"])
        #expect(LogLevel.trace < LogLevel.info && LogLevel.error < LogLevel.critical)
        #expect(LogFormat.auto.resolved(stdoutIsTerminal: true) == .text)
        #expect(LogFormat.auto.resolved(stdoutIsTerminal: false) == .json)
        #expect(LogFormat.json.resolved(stdoutIsTerminal: true) == .json)
    }
}
