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
        .executable(name: "interlude-push", targets: ["interlude-push"]),
        .library(name: "InterludeClient", targets: ["InterludeClient"]),
    ],
    targets: [
        // C libraries from Debian, one system-library target each.
        .systemLibrary(name: "CPulse", pkgConfig: "libpulse", providers: [.apt(["libpulse-dev"])]),
        .systemLibrary(name: "CSndfile", pkgConfig: "sndfile", providers: [.apt(["libsndfile1-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CSystemdBus", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
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
        // Remote notifications (issue 11): an MQTT client on libmosquitto's own thread.
        .target(name: "InterludeRemote", dependencies: ["CMosquitto"]),
        // The broker's messages -> engine decisions -> receipts back, and the `remote` config section read.
        .target(name: "InterludeRemoteBridge", dependencies: ["InterludeRemote", "InterludeEngine", "InterludeConfig", "InterludePolicy", "InterludeWire"]),
        // Notification state persistence (N15): SQLite in WAL mode, group commit; the engine's store port.
        .target(name: "InterludeStore", dependencies: ["CSQLite", "InterludePolicy", "InterludeEngine", "InterludeWire"]),
        // Engine: owns state, feeds the policies, carries out effects through ports.
        .target(name: "InterludeEngine", dependencies: ["InterludePolicy", "InterludeConfig", "InterludeWire"]),
        // The engine's audio and sound ports on the PulseAudio and libsndfile adapters, and A7's gain ledger.
        .target(name: "InterludeAudioPorts", dependencies: ["InterludeEngine", "InterludePulse", "InterludeSound", "InterludeWire", "CInterludeSys"]),
        // Socket server: connections -> engine calls.
        .target(name: "InterludeServer", dependencies: ["InterludeEngine", "InterludeWire", "CInterludeSys"]),
        // D-Bus adapter (sd-bus): org.freedesktop.Notifications calls -> engine calls, like the socket server.
        .target(name: "InterludeBus", dependencies: ["CSystemdBus", "InterludeEngine", "InterludePolicy", "InterludeWire"]),
        // Client library apps use; the CLI is its first user.
        .target(name: "InterludeClient", dependencies: ["InterludeWire"]),
        // What both CLI executables share: the argument reader and how errors and JSON lines print.
        .target(name: "InterludeCommandLine", dependencies: ["InterludeWire"]),
        // Scenario files, tone analysis (Goertzel), reference apps, SVG plots.
        .target(name: "InterludeScenario", dependencies: ["InterludeClient", "InterludePulse", "InterludeConfig"]),
        // Fakes and a manual clock for tests.
        .target(name: "InterludeTestSupport", dependencies: ["InterludePolicy", "InterludeEngine", "InterludeClient", "InterludeWire", "CInterludeSys"]),

        .executableTarget(name: "interluded", dependencies: [
            "InterludeServer", "InterludeEngine", "InterludePolicy", "InterludePulse", "InterludeSound", "InterludeStore", "InterludeConfig", "InterludeWire",
            "InterludeAudioPorts", "InterludeBus", "CInterludeSys",
            "InterludeRemote", "InterludeRemoteBridge", "InterludeCommandLine",
        ]),
        // The CLI links the client library only (fast start for `interlude play`); the commands that
        // play audio of their own run in `interlude-audio`, which `interlude` execs for them.
        .executableTarget(name: "interlude", dependencies: ["InterludeClient", "InterludeCommandLine"]),
        .executableTarget(name: "interlude-audio", dependencies: [
            "InterludeClient", "InterludeCommandLine", "InterludeScenario", "InterludePulse", "InterludeSound",
        ]),
        // `interlude push`: the provider's side of remote notifications, exec'd by `interlude`.
        .executableTarget(name: "interlude-push", dependencies: ["InterludeRemote", "InterludeWire", "InterludePolicy", "InterludeCommandLine"]),
        .executableTarget(name: "interlude-soundgen", dependencies: ["CSndfile"]),
        // What Scripts/bench and Scripts/torture measure with: the sink's monitor, child processes,
        // /proc, order statistics, and the torture suite's books (ledger, exit status, table).
        .target(name: "InterludeMeasure", dependencies: ["InterludePulse", "InterludeScenario"]),
        // Scripts/bench: onset, duck reaction, arbitration cost and resources of a running daemon.
        .executableTarget(name: "interlude-bench", dependencies: ["CSQLite",
            "InterludeClient", "InterludePulse", "InterludeScenario", "InterludePolicy", "InterludeConfig", "InterludeMeasure", "InterludeRemote", "InterludeWire",
            "InterludeStore",
        ]),
        // Scripts/torture: faults and load against private daemons and audio servers (README "Torture").
        .executableTarget(name: "interlude-torture", dependencies: [
            "InterludeClient", "InterludeWire", "InterludePulse", "InterludeScenario", "InterludeMeasure",
        ]),

        .testTarget(name: "InterludePolicyTests", dependencies: ["InterludePolicy", "InterludeTestSupport"]),
        .testTarget(name: "InterludeWireTests", dependencies: ["InterludeWire", "InterludeTestSupport", "InterludeCommandLine", "InterludePolicy"]),
        .testTarget(name: "InterludeConfigTests", dependencies: ["InterludeConfig"]),
        .testTarget(name: "InterludeStoreTests", dependencies: ["InterludeStore", "InterludePolicy", "InterludeEngine", "InterludeTestSupport"],
                    exclude: ["Fixtures"]),  // read from the source tree by path (SchemaCompatibilityTests)
        .testTarget(name: "InterludeServerTests", dependencies: [
            "InterludeServer", "InterludeClient", "InterludeEngine", "InterludeTestSupport", "InterludeConfig", "InterludeStore",
        ]),
        .testTarget(name: "InterludeBusTests", dependencies: [
            "InterludeBus", "InterludeEngine", "InterludeTestSupport", "InterludeConfig", "CSystemdBus",
        ]),
        .testTarget(name: "InterludeAudioPortsTests", dependencies: ["InterludeAudioPorts", "InterludeEngine", "InterludePulse"]),
        .testTarget(name: "InterludePulseTests", dependencies: ["InterludePulse", "InterludeScenario", "InterludeTestSupport"]),
        .testTarget(name: "InterludeMeasureTests", dependencies: ["InterludeMeasure", "InterludeTestSupport"]),
        .testTarget(name: "InterludeRemoteTests", dependencies: ["InterludeRemote"]),
        .testTarget(name: "InterludeRemoteBridgeTests", dependencies: ["InterludeRemoteBridge", "InterludeRemote", "InterludeConfig"]),
        .testTarget(name: "InterludeSoundTests", dependencies: ["InterludeSound", "CSndfile", "InterludeTestSupport"]),  // CSndfile: tests write MP3/Opus/float files with libsndfile
        .testTarget(name: "InterludeEndToEndTests", dependencies: [
            "InterludeClient", "InterludeScenario", "InterludePulse", "InterludeServer", "InterludeEngine", "InterludeTestSupport",
            "InterludeRemote", "InterludeAudioPorts",
        ]),
    ]
)
