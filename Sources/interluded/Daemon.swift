import Dispatch
import Foundation
import InterludeConfig
import InterludeEngine
import InterludePulse
import InterludeRemote
import InterludeServer
import InterludeSound
import InterludeStore

/// The daemon's composition root: config → adapters → engine → socket server.
enum Daemon {
    static let version = "0.1.0"
    static let usage = """
    usage: interluded [--socket PATH] [--config DIR] [--state DIR] [--pulse-server SERVER] [--private]
                      [--exit-with-parent] [--version]

    Interlude's audio-policy and notification-sound daemon.
      --socket PATH          socket to listen on (default $INTERLUDE_SOCKET or $XDG_RUNTIME_DIR/interlude/socket)
      --config DIR           config folder read last (default $INTERLUDE_CONFIG_DIR); see Config/interlude.json5
      --state DIR            state folder (default $XDG_STATE_HOME/interlude)
      --pulse-server SERVER  PulseAudio server (default $PULSE_SERVER or the user's)
      --private              manage only streams marked with this daemon's socket (interlude.daemon);
                             for the scenario runner's daemon beside a user's daemon
      --exit-with-parent     stop when the process that started this daemon goes away
    """

    static func log(_ line: String) {
        FileHandle.standardError.write(Data("interluded: \(line)\n".utf8))
    }

    static func run(arguments: [String]) async -> Int32 {
        let env = ProcessInfo.processInfo.environment
        var options: [String: String] = [:]
        var i = 1
        while i < arguments.count {
            let a = arguments[i]
            switch a {
            case "--help", "-h": print(usage); return 0
            case "--private": options["private"] = "1"; i += 1
            case "--exit-with-parent": options["exit-with-parent"] = "1"; i += 1
            case "--version": print("interluded \(version)"); return 0
            case "--socket", "--config", "--state", "--pulse-server":
                guard i + 1 < arguments.count else { log("\(a) needs a value"); return 2 }
                options[String(a.dropFirst(2))] = arguments[i + 1]
                i += 2
            default:
                log("unknown argument \(a)\n\(usage)")
                return 2
            }
        }
        let home = ProjectResources.home(environment: env)
        // A config folder named on purpose must exist (a typo would silently run on defaults).
        for (source, dir) in [("--config", options["config"]), ("INTERLUDE_CONFIG_DIR", env["INTERLUDE_CONFIG_DIR"])] {
            guard let dir, !dir.isEmpty, options["config"] == nil || source == "--config" else { continue }
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
                log("bad config: \(source) \(dir): no such folder [configNotFound]")
                return 78  // EX_CONFIG
            }
        }
        let config: InterludeConfig
        do {
            config = try ConfigLoader.load(folders: ConfigLoader.folders(
                builtin: home.map { $0 + "/Config" }, override: options["config"], environment: env))
        } catch {
            log("bad config: \(error)")
            return 78  // EX_CONFIG
        }
        log("config from \(config.files.isEmpty ? "built-in defaults" : config.files.joined(separator: ", "))")

        // Refuse a live socket before touching the audio server: a second daemon must not act at all.
        let path = SocketServer.defaultPath(flag: options["socket"], environment: env)
        if SocketServer.isLive(path) {
            log("another daemon is listening on \(path)")
            return 1
        }
        let pulse = PulseConnection(server: options["pulse-server"], clientName: "interluded",
                                    properties: ["application.id": "org.interlude.Daemon"])
        do { try pulse.connect(timeout: 5) } catch {
            log("audio server not reachable yet (\(error)); will keep trying")
        }
        pulse.enableReconnect()
        let stateDir = options["state"] ?? NotificationStore.defaultDirectory(environment: env)
        let ledger = GainLedger(path: stateDir + "/applied-gains.json")
        if ledger.count > 0 { log("an earlier run left gains on \(ledger.count) stream(s); undoing them as they are seen [A7]") }
        let backend = PulseAudioBackend(connection: pulse, stepSeconds: config.number("audio.rampStepMs") / 1000,
                                        maxStepDb: config.number("audio.maxRampStepDb"), ledger: ledger, log: log)
        let dataHome = env["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory() + "/.local/share"
        let lookup = SoundLookup(appFolders: config.strings("sounds.appFolders"),
                                 userFolder: config.string("sounds.userFolder") ?? dataHome + "/interlude/sounds",
                                 projectFolder: home.map { $0 + "/Sounds" },
                                 dataDirs: SoundLookup.standardDataDirs(environment: env),
                                 theme: config.string("sounds.theme") ?? "freedesktop")
        // S1 falls back to the default sound: it must exist, or every fallback would fail.
        let defaultSound = config.string("sounds.default") ?? "default"
        guard case .file = lookup.resolve(defaultSound) else {
            log("bad config: \(config.sources["sounds"] ?? "the config"): key 'sounds.default': no sound named \(defaultSound) in the sound folders [configBadValue]")
            return 78  // EX_CONFIG
        }
        let player = PulseSoundPlayer(connection: pulse, lookup: lookup, defaultName: defaultSound,
                                      maxDuration: config.number("sounds.maxDurationSeconds"),
                                      maxBytes: Int(config.number("sounds.maxSampleBytes")))
        let engine: Engine
        do {
            let store = try SQLiteNotificationStore(directory: stateDir)
            engine = try Engine(config: config, audio: backend, sounds: player, store: store, version: version, log: log)
            log("state in \(stateDir)")
        } catch {
            log("cannot use the state in \(stateDir): \(error)")
            return 1
        }
        await engine.setIdentity(path, onlyOwnStreams: options["private"] != nil)
        await engine.start()
        // Remote notifications (issue 11), when the config names a broker.
        let remote: RemoteBridge?
        do {
            remote = try await RemoteBridge.make(config: config, engine: engine, log: log)
            try remote?.start()
        } catch {
            log("bad config: \(error)")
            return 78  // EX_CONFIG
        }

        let server = SocketServer(path: path, engine: engine, maxClients: Int(config.number("server.maxClients")),
                                  maxOutputBytes: Int(config.number("server.maxOutputBytes")), log: log)
        do { try server.start() } catch {
            log("cannot listen: \(error)")
            return 1
        }
        log("listening on \(path)")
        await waitForTerminationSignal(orParentExit: options["exit-with-parent"] != nil)
        log("stopping")
        remote?.stop()
        server.stop()
        await engine.releaseStreams()  // no duck or mute of ours outlives the daemon
        pulse.disconnect()
        return 0
    }
}

/// Waits for SIGINT or SIGTERM. Written outside main.swift: signal handlers in main-actor code
/// trap under Swift 6 (DESIGN.md).
func waitForTerminationSignal(orParentExit watchParent: Bool) async {
    let parent = getppid()
    signal(SIGINT, SIG_IGN)
    signal(SIGTERM, SIG_IGN)
    signal(SIGPIPE, SIG_IGN)
    await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
        let once = OnceFlag()
        let queue = DispatchQueue(label: "interlude.signals")
        let sources = [SIGINT, SIGTERM].map { sig -> DispatchSourceSignal in
            let s = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            s.setEventHandler { @Sendable in if once.claim() { k.resume() } }
            s.resume()
            return s
        }
        SignalSources.keep(sources)
        if watchParent, let fd = ParentWatch.pidfd(parent) {
            // The parent's pidfd becomes readable when it exits: no polling (an idle daemon sleeps).
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { @Sendable in if once.claim() { k.resume() } }
            source.resume()
            SignalSources.keepRead(source)
            if getppid() != parent, once.claim() { k.resume() }  // gone before the watch began
        } else if watchParent {
            // No pidfd_open (kernel < 5.3 or glibc < 2.36): check the parent 4 times a second.
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + 0.25, repeating: 0.25)
            timer.setEventHandler { @Sendable in
                if getppid() != parent, once.claim() { k.resume() }
            }
            timer.resume()
            SignalSources.keepTimer(timer)
        }
    }
}

/// Keeps signal sources alive for the process's life.
enum SignalSources {
    nonisolated(unsafe) static var all: [DispatchSourceSignal] = []
    nonisolated(unsafe) static var timers: [DispatchSourceTimer] = []
    nonisolated(unsafe) static var reads: [DispatchSourceRead] = []
    static func keep(_ s: [DispatchSourceSignal]) { all += s }
    static func keepTimer(_ t: DispatchSourceTimer) { timers.append(t) }
    static func keepRead(_ r: DispatchSourceRead) { reads.append(r) }
}

/// Watches the parent process without polling (`--exit-with-parent`).
enum ParentWatch {
    /// `pidfd_open(pid, 0)`: a descriptor that becomes readable when the process exits, or nil.
    /// Looked up with `dlsym` (glibc 2.36 has it, but the Glibc module does not import
    /// `<sys/pidfd.h>`); nil where the C library or the kernel (< 5.3) lacks it.
    static func pidfd(_ pid: pid_t) -> Int32? {
        guard pid > 1, let symbol = dlsym(nil, "pidfd_open") else { return nil }  // nil handle: RTLD_DEFAULT
        typealias PidfdOpen = @convention(c) (pid_t, UInt32) -> Int32
        let fd = unsafeBitCast(symbol, to: PidfdOpen.self)(pid, 0)
        guard fd >= 0 else { return nil }
        return fd
    }
}

/// A flag that can be claimed once, from any thread.
final class OnceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    func claim() -> Bool { lock.withLock { if done { return false }; done = true; return true } }
}
