// swift-tools-version:6.0
// Interlude: a Linux audio-policy and notification-sound daemon on PulseAudio.
// Dependencies point inward only: the policy imports nothing of ours, adapters never import
// each other, executables are thin composition roots (see README "Layout").
import PackageDescription

let package = Package(
    name: "Interlude",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "interluded", targets: ["interluded"]),
        .executable(name: "interlude", targets: ["interlude"]),
        .executable(name: "interlude-audio", targets: ["interlude-audio"]),
        .library(name: "InterludeClient", targets: ["InterludeClient"]),
    ],
    targets: [
        // C libraries from Debian, one system-library target each.
        .systemLibrary(name: "CPulse", pkgConfig: "libpulse", providers: [.apt(["libpulse-dev"])]),
        .systemLibrary(name: "CSndfile", pkgConfig: "sndfile", providers: [.apt(["libsndfile1-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // Tiny C shim for what Glibc does not import into Swift (struct ucred for SO_PEERCRED).
        .target(name: "CInterludeSys"),

        // Pure core: (state, event, now) -> (state, [effect]). No I/O, no clock reads.
        .target(name: "InterludePolicy"),
        // Config loading (JSON5, XDG order, file/line/key errors).
        .target(name: "InterludeConfig", dependencies: ["InterludePolicy"]),
        // Protocol contract shared by daemon, client library and CLI.
        .target(name: "InterludeWire", dependencies: ["InterludePolicy"]),
        // Adapters: each wraps one C library.
        .target(name: "InterludePulse", dependencies: ["CPulse"]),
        .target(name: "InterludeSound", dependencies: ["CSndfile"]),
        // Notification state persistence (N15): SQLite in WAL mode, one transaction per save.
        .target(name: "InterludeStore", dependencies: ["CSQLite", "InterludePolicy"]),
        // Engine: owns state, feeds the policies, carries out effects through ports.
        .target(name: "InterludeEngine", dependencies: ["InterludePolicy", "InterludeConfig", "InterludeWire"]),
        // Socket server: connections -> engine calls.
        .target(name: "InterludeServer", dependencies: ["InterludeEngine", "InterludeWire", "CInterludeSys"]),
        // Client library apps use; the CLI is its first user.
        .target(name: "InterludeClient", dependencies: ["InterludeWire"]),
        // What both CLI executables share: the argument reader and how errors and JSON lines print.
        .target(name: "InterludeCommandLine", dependencies: ["InterludeWire"]),
        // Scenario files, tone analysis (Goertzel), reference apps, SVG plots.
        .target(name: "InterludeScenario", dependencies: ["InterludeClient", "InterludePulse", "InterludeConfig"]),
        // Fakes and a manual clock for tests.
        .target(name: "InterludeTestSupport", dependencies: ["InterludePolicy", "InterludeEngine"]),

        .executableTarget(name: "interluded", dependencies: [
            "InterludeServer", "InterludeEngine", "InterludePulse", "InterludeSound", "InterludeStore", "InterludeConfig", "InterludeWire",
        ]),
        // The CLI links the client library only (fast start for `interlude play`); the commands that
        // play audio of their own run in `interlude-audio`, which `interlude` execs for them.
        .executableTarget(name: "interlude", dependencies: ["InterludeClient", "InterludeCommandLine"]),
        .executableTarget(name: "interlude-audio", dependencies: [
            "InterludeClient", "InterludeCommandLine", "InterludeScenario", "InterludePulse", "InterludeSound",
        ]),
        .executableTarget(name: "interlude-soundgen", dependencies: ["CSndfile"]),
        // Scripts/bench: onset, duck reaction, arbitration cost and resources of a running daemon.
        .executableTarget(name: "interlude-bench", dependencies: [
            "InterludeClient", "InterludePulse", "InterludeScenario", "InterludePolicy", "InterludeConfig",
        ]),

        .testTarget(name: "InterludePolicyTests", dependencies: ["InterludePolicy", "InterludeTestSupport"]),
        .testTarget(name: "InterludeWireTests", dependencies: ["InterludeWire"]),
        .testTarget(name: "InterludeConfigTests", dependencies: ["InterludeConfig"]),
        .testTarget(name: "InterludeStoreTests", dependencies: ["InterludeStore", "InterludePolicy"]),
        .testTarget(name: "InterludeServerTests", dependencies: [
            "InterludeServer", "InterludeClient", "InterludeEngine", "InterludeTestSupport", "InterludeConfig",
        ]),
        .testTarget(name: "InterludePulseTests", dependencies: ["InterludePulse", "InterludeScenario", "InterludeTestSupport"]),
        .testTarget(name: "InterludeSoundTests", dependencies: ["InterludeSound", "CSndfile"]),  // CSndfile: tests write MP3/Opus/float files with libsndfile
        .testTarget(name: "InterludeEndToEndTests", dependencies: [
            "InterludeClient", "InterludeScenario", "InterludePulse", "InterludeServer", "InterludeEngine", "InterludeTestSupport",
        ]),
    ]
)
