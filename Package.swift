// swift-tools-version:6.1
import Foundation
import PackageDescription

// Layers, bottom to top:
//   CMicroHTTPD, CLibCrypto, CLibPQ  system libraries (Debian libmicrohttpd-dev, libssl-dev, libpq-dev)
//   MHDShim                  the only code that includes microhttpd.h
//   CryptoShim               OpenSSL's libcrypto for the broker's own cryptography
//   BrokerCrypto             Swift wrapper over CryptoShim
//   Postgres                 the only code that includes libpq: connections on threads of their own, a pool, LISTEN
//   CurlShim, APIClient      the HTTP client of every outbound call: libcurl (the only code that includes it), address
//                            policy, caps, the CA stores handed to libssl
//   WireValues               values both sides of the HTTP edge use: JSON, form fields, IP networks, byte writers
//   HTTPServer               transport: request, response, router, limits, server; alone knows MHDShim
//   BuildStamp               the commit the binary was built from (a C string constant set by the build)
//   BrokerCore               the broker (its API/ layer alone speaks HTTP); imports no C but BuildStamp
//   token-broker             the executable: command line, signals, start and stop
let package = Package(
    name: "TokenBroker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "token-broker", targets: ["token-broker"]),
        .executable(name: "broker-bench-state", targets: ["broker-bench-state"]),
        // For Fuzz/, a package of its own that depends on this one by path.
        .library(name: "BrokerCore", targets: ["BrokerCore"]),
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
        .library(name: "WireValues", targets: ["WireValues"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", exact: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", exact: "2.4.1"),
        .package(url: "https://github.com/jpsim/Yams.git", exact: "6.2.2"),
        // swift-prometheus's own dependencies, pinned here so that they move only when this file
        // says so (SwiftPM pins only what a manifest names; BrokerCore names their products).
        .package(url: "https://github.com/apple/swift-metrics.git", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-atomics.git", exact: "1.3.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CLibCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // GnuTLS (which libmicrohttpd-dev brings) for the shim's direct answers over HTTPS.
        .target(name: "MHDShim", dependencies: ["CMicroHTTPD"], linkerSettings: [.linkedLibrary("gnutls")]),
        .target(name: "CryptoShim", dependencies: ["CLibCrypto"]),
        .target(name: "BrokerCrypto", dependencies: ["CryptoShim"]),
        .target(name: "Postgres", dependencies: ["CLibPQ"]),
        // libssl for one thing: handing each new TLS connection's SSL_CTX the CA store parsed once.
        .target(name: "CurlShim", dependencies: ["CLibCurl"], linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        .target(name: "APIClient", dependencies: ["CurlShim"]),
        .target(name: "WireValues"),
        // The commit in the binary: `BROKER_COMMIT=<id> swift build` (make and the Dockerfile do).
        .target(name: "BuildStamp", cSettings: Context.environment["BROKER_COMMIT"].map { commit in
            [.define("BROKER_COMMIT", to: "\"\(commit.filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." })\"")]
        } ?? []),
        .target(
            name: "HTTPServer",
            dependencies: [
                "MHDShim",
                "WireValues",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "BrokerCore",
            dependencies: [
                "HTTPServer",
                "WireValues",
                "BrokerCrypto",
                "Postgres",
                "APIClient",
                "BuildStamp",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                // Linked through Prometheus anyway; named for the pins above.
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "Yams", package: "Yams"),
            ]
        ),
        .executableTarget(
            name: "token-broker",
            dependencies: [
                "BrokerCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Bench-only: writes a state directory of N sessions through the broker's own code (bench/).
        .executableTarget(name: "broker-bench-state", dependencies: ["BrokerCore"]),
    ]
)

// The tests, where Tests/ is: the image's build context carries Package.swift and Sources/
// only (.dockerignore), and SwiftPM refuses a manifest that names a target whose folder is not
// there — even to build one product.
if FileManager.default.fileExists(atPath: Context.packageDirectory + "/Tests") {
    package.targets += [
        .testTarget(name: "BrokerCryptoTests", dependencies: ["BrokerCrypto"]),
        .testTarget(name: "WireValuesTests", dependencies: ["WireValues"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "WireValues"]),
        .testTarget(name: "BrokerCoreTests", dependencies: ["BrokerCore", "HTTPServer", "WireValues", "APIClient", "TestWaiting"],
                    resources: [.copy("Resources")]),
        .testTarget(name: "IntegrationTests", dependencies: ["TestWaiting"]),
        // How both test targets wait for a condition.
        .target(name: "TestWaiting", path: "Tests/TestWaiting"),
    ]
}

// Strict settings for every Swift target, in one place.
for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    settings.append(.unsafeFlags(["-require-explicit-sendable"]))
    target.swiftSettings = settings
}
