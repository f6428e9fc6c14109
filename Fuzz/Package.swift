// swift-tools-version:6.1
// libFuzzer targets for the broker's Swift parsers (see README.md in this folder).
//
// A separate package so that its sanitizer build (`--sanitize fuzzer --sanitize address`,
// `-enable-testing`) never touches the main package's `.build`. It depends on the main package
// by local path; TB_MAIN_PACKAGE overrides that path (only for trying a patched copy).
import PackageDescription

let mainPackage = Context.environment["TB_MAIN_PACKAGE"] ?? ".."

let package = Package(
    name: "BrokerFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "TokenBroker", path: mainPackage),
    ],
    targets: [
        .target(name: "FuzzDriver"),
        // One binary, all Swift targets; the target is picked by the name it runs under
        // (fuzz-json, fuzz-form, …: symlinks made by Fuzz/Makefile) or by FUZZ_TARGET.
        .executableTarget(
            name: "broker-fuzz",
            dependencies: [
                .product(name: "BrokerCore", package: "TokenBroker"),
                .product(name: "HTTPServer", package: "TokenBroker"),
                .product(name: "WireValues", package: "TokenBroker"),
                "FuzzDriver",
            ],
            path: "Sources/BrokerFuzz",
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
    ],
    swiftLanguageModes: [.v5]
)
