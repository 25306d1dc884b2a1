import CInterludeSys
import Dispatch
import Foundation
import InterludeAudioPorts
import InterludeBus
import InterludeCommandLine
import InterludeConfig
import InterludeEngine
import InterludePulse
import InterludeRemote
import InterludeRemoteBridge
import InterludeServer
import InterludeSound
import InterludeStore
import InterludeWire
import Synchronization

/// The daemon's composition root: config → adapters → engine → socket server.
enum Daemon {
    static let version = "0.1.0"
    /// Exit status when another daemon of this user already manages the audio server's streams
    /// (`interlude.manager`, ``managerClaimKey``), holds the state folder (``StateFolderLock``) or
    /// listens on the socket: EX_TEMPFAIL, "try again once it is gone".
    static let anotherManagerStatus: Int32 = 75
    /// The client property a managing daemon announces itself with on the audio server
    /// (``PulseClaim``: value the socket path, with `.uid` and `.since`).
    static let managerClaimKey = "interlude.manager"
    static let usage = """
    usage: interluded [--socket PATH] [--config DIR] [--state DIR] [--pulse-server SERVER] [--private]
                      [--exit-with-parent] [--no-bus | --bus] [--replace] [--version]

    Interlude's audio-policy and notification-sound daemon. An option's value may also follow
    an equals sign (--socket=PATH).
      --socket PATH          socket to listen on (default $INTERLUDE_SOCKET or $XDG_RUNTIME_DIR/interlude/socket)
      --config DIR           config folder read last (default $INTERLUDE_CONFIG_DIR); see Config/interlude.json5
      --state DIR            state folder (default $XDG_STATE_HOME/interlude)
      --pulse-server SERVER  PulseAudio server (default $PULSE_SERVER or the user's)
      --private              manage only streams marked with this daemon's socket (interlude.daemon);
                             for the scenario runner's daemon beside a user's daemon
      --exit-with-parent     stop when the process that started this daemon goes away
      --no-bus               stay off the session bus (default: join $DBUS_SESSION_BUS_ADDRESS, serve
                             org.freedesktop.Notifications if it is free, else watch as a companion)
      --bus                  join the session bus even with --private (which stays off it: a private daemon
                             beside the user's must not answer or watch the user's notifications)
      --replace              take org.freedesktop.Notifications from a daemon that allows it

    One daemon per audio server and user manages its streams: it announces itself on the server
    (client property interlude.manager). A second one exits with status 75 and says which daemon
    holds it; --private daemons manage only their own streams and do not compete.
    """

    /// Standard error, written off the logging thread (the engine logs a line per notification).
    /// When 5 s pass with no line after a burst, the heap the burst left free goes back to the
    /// system (`malloc_trim`: glibc keeps freed memory of its arenas otherwise; after the bench's
    /// notification bursts about 4 MB of the 9 MB the daemon had grown, issue 9).
    static let logWriter = LogWriter(quietSeconds: 5, onQuiet: { _ = interlude_malloc_trim() })

    static func log(_ line: String) {
        logWriter.write("interluded: " + LogWriter.oneLine(line))
    }

    /// What the command line asks: run with these options (flags map to "1"), or exit now with a
    /// status (after `--help`, `--version`, or a usage error said in the log).
    enum CommandLineOutcome: Equatable {
        case run([String: String])
        case exit(Int32)
    }

    /// The flags `interluded` takes.
    static let flagNames: Set<String> = ["help", "version", "private", "exit-with-parent", "no-bus", "bus", "replace"]
    /// The options that take a value (a path or an address; never empty).
    static let valueNames: Set<String> = ["socket", "config", "state", "pulse-server"]

    /// Reads the daemon's arguments (without the program name) with the CLI's reader
    /// (``Arguments``: `--name value` or `--name=value`, an option that takes a value given twice
    /// refused, an unknown one named), then the daemon's own checks: no positional argument, no
    /// empty path (`--state ""` put the state in the root folder), not `--bus` with `--no-bus`, not
    /// `--replace` off the bus.
    static func readOptions(_ args: [String]) -> CommandLineOutcome {
        let parsed: Arguments
        do {
            if args.contains("-h") { print(usage); return .exit(0) }
            parsed = try Arguments(args, flags: flagNames, options: valueNames)
            if parsed.has("help") { print(usage); return .exit(0) }
            if parsed.has("version") { print("interluded \(version)"); return .exit(0) }
            if let extra = parsed.positionals.first { throw Arguments.UsageError(description: "unknown argument \(extra)") }
            if let empty = valueNames.sorted().first(where: { parsed.value($0)?.isEmpty == true }) {
                throw Arguments.UsageError(description: "--\(empty) needs a value")
            }
            // Which one was meant? (It ran with one of them.)
            if parsed.has("bus"), parsed.has("no-bus") { throw Arguments.UsageError(description: "--bus and --no-bus contradict each other; give one") }
            // --replace takes the bus name from another daemon: off the bus there is none to take.
            if parsed.has("replace"), parsed.has("no-bus") || (parsed.has("private") && !parsed.has("bus")) {
                throw Arguments.UsageError(description: "--replace takes org.freedesktop.Notifications on the session bus; with "
                    + (parsed.has("no-bus") ? "--no-bus" : "--private (without --bus)") + " the daemon is not on it")
            }
        } catch {
            log("\(error)")
            for line in usage.split(separator: "\n", omittingEmptySubsequences: false) { log(String(line)) }
            return .exit(2)
        }
        var options: [String: String] = [:]
        for name in valueNames { options[name] = parsed.value(name) }
        for name in parsed.flags { options[name] = "1" }
        return .run(options)
    }

    static func run(arguments: [String]) async -> Int32 {
        // A peer that went away is an EPIPE error, never the end of the daemon (SIGPIPE's default
        // action): libmosquitto and OpenSSL write to the broker with write(2), and standard error
        // may be a pipe whose reader is gone. From the first line: the log is written and the
        // broker connection starts long before the signal handlers are set up.
        signal(SIGPIPE, SIG_IGN)
        // SIGINT and SIGTERM are watched from here on (SignalWatch): one that comes during the
        // start (a service manager stopping a daemon it has just started) stops the daemon once
        // it has started, as one that comes later does.
        let exitRequest = ExitRequest()
        await SignalWatch.watch([SIGINT, SIGTERM], label: "interlude.signals") { exitRequest.request(0) }
        // SIGHUP too (a `systemctl reload` just after the start killed the daemon, a stranger's
        // find): one that comes before the daemon can reload is kept and done once it can.
        let reloadRequest = ReloadRequest()
        await SignalWatch.watch([SIGHUP], label: "interlude.reload") { reloadRequest.signal() }
        let env = ProcessInfo.processInfo.environment
        let options: [String: String]
        switch readOptions(Array(arguments.dropFirst())) {
        case let .run(read): options = read
        case let .exit(status): return status
        }
        let home = ProjectResources.home(environment: env)
        log("built-in config and sounds from \(home ?? "nowhere (no Config/ found; set INTERLUDE_HOME)")")
        // A config folder named on purpose must exist (a typo would silently run on defaults).
        do { try ConfigLoader.checkNamedFolder(override: options["config"], environment: env) } catch {
            log("bad config: \(error)")
            return 78  // EX_CONFIG
        }
        let folders = ConfigLoader.folders(builtin: home.map { $0 + "/Config" }, override: options["config"], environment: env)
        let config: InterludeConfig
        do { config = try ConfigLoader.load(folders: folders) } catch {
            log("bad config: \(error)")
            return 78  // EX_CONFIG
        }
        log("config from \(config.files.isEmpty ? "built-in defaults" : config.files.joined(separator: ", "))")
        for w in config.contradictions { log("config: \(w)") }

        // Refuse a live socket before touching the audio server: a second daemon must not act at all.
        let path = SocketServer.defaultPath(flag: options["socket"], environment: env)
        // A path no socket can have (longer than an address holds) is refused first, not after
        // the audio server was joined (a managing daemon said "another manager", exit 75).
        do { _ = try UnixSocket.address(path) } catch {
            log("cannot listen: \(error)")
            return 1
        }
        if SocketServer.isLive(path) {
            log("another daemon is listening on \(path); one daemon per socket: stop the other or give this one its own --socket [socketInUse]")
            return anotherManagerStatus
        }
        // One daemon per state folder: a second one on the same --state (another socket) would
        // overwrite the first's notifications and undo its ducks (A7's ledger). Held until exit.
        let stateDir = options["state"] ?? NotificationStore.defaultDirectory(environment: env)
        let stateLock: StateFolderLock
        do { stateLock = try StateFolderLock(directory: stateDir) } catch {
            if error.code == .storeInUse {
                log("\(error.message) [\(error.code.rawValue)]")
                return anotherManagerStatus
            }
            log("cannot use the state in \(stateDir): \(error.message) [\(error.code.rawValue)]")
            return 1
        }
        // One manager per audio server and user (issue 7 hole 12): two daemons that both manage
        // the same streams each take the other's duck for the user's volume and duck it again,
        // down to silence. A managing daemon announces itself in its client properties; the
        // claim goes away with its connection (a SIGKILLed daemon leaves none behind).
        let claim = options["private"] == nil ? PulseClaim(key: managerClaimKey, value: path) : nil
        let pulse = PulseConnection(server: options["pulse-server"], clientName: "interluded",
                                    properties: ["application.id": "org.interlude.Daemon"], claim: claim)
        do { try pulse.connect(timeout: 5) } catch {
            log("audio server not reachable yet (\(error)); will keep trying")
        }
        if claim != nil, let clients = try? pulse.clients(), let own = pulse.clientIndex,
           let holder = PulseClaim.holder(of: managerClaimKey, among: clients), holder.index != own {
            log(anotherManagerMessage(holder, server: options["pulse-server"], when: "already manages"))
            pulse.disconnect()
            return anotherManagerStatus
        }
        pulse.enableReconnect()
        let pulseServer = options["pulse-server"]
        let ledger = GainLedger(path: stateDir + "/applied-gains.json")
        if ledger.count > 0 { log("an earlier run left gains on \(ledger.count) stream(s); undoing them as they are seen [A7]") }
        let backend = PulseAudioBackend(connection: pulse, stepSeconds: config.number("audio.rampStepMs") / 1000,
                                        maxStepDb: config.number("audio.maxRampStepDb"), ledger: ledger, log: log,
                                        onClaimLost: { holder in
            log(anotherManagerMessage(holder, server: pulseServer, when: "announced itself first and manages"))
            exitRequest.request(anotherManagerStatus)
        })
        let sounds: SoundSettings
        do { sounds = try SoundSettings(config: config, home: home, environment: env) } catch {
            log("bad config: \(error)")
            return 78  // EX_CONFIG
        }
        let player = PulseSoundPlayer(connection: pulse, lookup: sounds.lookup, defaultName: sounds.defaultName,
                                      maxDuration: sounds.maxDuration, maxBytes: sounds.maxBytes)
        let engine: Engine
        do {
            let store = try SQLiteNotificationStore(directory: stateDir, leaders: .shared)
            engine = try Engine(config: config, audio: backend, sounds: player, store: store, version: version, log: log)
            log("state in \(stateDir)")
        } catch {
            log("cannot use the state in \(stateDir): \(error)")
            return 1
        }
        await engine.setIdentity(path, onlyOwnStreams: options["private"] != nil)
        // SIGHUP and `interlude reload`: the same files again; a bad one is refused with file, line
        // and key, and the running config stays. So is a named config folder deleted since the
        // start (configNotFound, as at start): its files would silently be gone.
        let configOverride = options["config"]
        // The files of the config in force: at start, then those of each reload taken.
        let filesInForce = Mutex(config.files)
        let reloader: Engine.Reloader = { [weak engine] in
            let fresh: InterludeConfig, newSounds: SoundSettings
            do {
                try ConfigLoader.checkNamedFolder(override: configOverride, environment: env, inForce: filesInForce.withLock { $0 })
                fresh = try ConfigLoader.load(folders: folders)
                newSounds = try SoundSettings(config: fresh, home: home, environment: env)
                // Read at start only, but a section the next start would refuse is refused now
                // (taken, it left no daemon after that start: exit 78).
                do { _ = try RemoteBridge.settings(config: fresh) } catch {
                    throw RemoteConfigProblem(message: "\(error) (the next start would refuse it)")
                }
            } catch {
                log("reload refused, the running config stays: \(error)")
                return .failure(WireError(.badRequest, "reload refused, the running config stays: \(error)"))
            }
            filesInForce.withLock { $0 = fresh.files }
            await player.reconfigure(lookup: newSounds.lookup, defaultName: newSounds.defaultName,
                                     maxDuration: newSounds.maxDuration, maxBytes: newSounds.maxBytes)
            guard let engine else { return .failure(WireError(.internalError, "the daemon is stopping")) }
            return .success(await engine.reload(config: fresh))
        }
        await engine.setReloader(reloader)
        reloadRequest.setHandler { Task { _ = await reloader() } }
        await engine.start()
        // Remote notifications (issue 11), when the config names a broker.
        let remote: RemoteBridge?
        do {
            remote = try await RemoteBridge.make(config: config, engine: engine, log: log)
            try await remote?.start()
        } catch {
            log("bad config: \(error)")
            return 78  // EX_CONFIG
        }

        let server = SocketServer(path: path, engine: engine, maxClients: Int(config.number("server.maxClients")),
                                  maxClientsPerProcess: Int(config.number("server.maxClientsPerProcess")),
                                  maxOutputBytes: Int(config.number("server.maxOutputBytes")), log: log)
        do { try server.start() } catch {
            log("cannot listen: \(error)")
            return 1
        }
        log("listening on \(path)")
        // The session bus: server or companion mode (README "D-Bus notifications"); no bus is a log line.
        let busConfig = NotificationsBusConfig(defaultSound: config.string("bus.defaultSound") ?? "message-new-instant",
                                               maxNotificationBytes: Int(config.number("bus.maxNotificationBytes")))
        let offReason = options["no-bus"] != nil ? "--no-bus" : options["private"] != nil && options["bus"] == nil ? "--private (without --bus)" : nil
        let bus = await NotificationsBus.join(address: env["DBUS_SESSION_BUS_ADDRESS"],
                                              engine: engine, replace: options["replace"] != nil, config: busConfig,
                                              version: version, log: log, off: offReason)
        // MPRIS players (issue 10): paused for calls and resumed after, on the same session bus.
        let players = await Self.watchPlayers(address: env["DBUS_SESSION_BUS_ADDRESS"], engine: engine, log: log, off: offReason)
        // Serving on the socket and the bus: the unit's `Type=notify` counts the daemon started now.
        ServiceManager.ready(status: "listening on \(path)")
        let status = await waitForTerminationSignal(orParentExit: options["exit-with-parent"] != nil, or: exitRequest)
        ServiceManager.stopping()
        log("stopping")
        await engine.beginStopping()
        // No request is taken from now on; those being decided finish and are answered before
        // the socket's connections and the bus close (N15), both at once, each within 5 s.
        async let busStopped: Void = bus.shutDown(timeout: 5)
        async let socketStopped: Void = server.shutDown(timeout: 5)
        remote?.stop()
        _ = await (busStopped, socketStopped)
        await engine.releaseStreams()  // no duck or mute of ours outlives the daemon
        await engine.releasePlayers()  // nor a pause (A5): on the bus, before its connection closes
        players?.stop()
        pulse.disconnect()
        withExtendedLifetime(stateLock) {}  // the state folder is ours until the process ends
        return status
    }

    /// Watches the MPRIS players on the session bus (issue 10), or says why not.
    static func watchPlayers(address: String?, engine: Engine, log: @escaping @Sendable (String) -> Void,
                             off reason: String?) async -> MprisWatcher? {
        if let reason { log("mpris: not watching media players: \(reason)"); return nil }
        guard let address, !address.isEmpty else { log("mpris: not watching media players: no session bus"); return nil }
        do {
            let w = try MprisWatcher(address: address, engine: engine, log: log)
            try await w.start()
            return w
        } catch {
            log("mpris: not watching media players: \(error)")
            return nil
        }
    }

    /// What a daemon that does not manage says about the one that does.
    static func anotherManagerMessage(_ holder: PulseClient, server: String?, when: String) -> String {
        let pid = holder.processID.map { "pid \($0), " } ?? ""
        let socket = holder.properties[managerClaimKey] ?? "?"
        let where_ = server ?? ProcessInfo.processInfo.environment["PULSE_SERVER"] ?? "the default server"
        return "another interluded (\(pid)socket \(socket)) \(when) the streams of the audio server \(where_) "
            + "for this user; one manager per audio server and user: this one exits with status \(anotherManagerStatus) "
            + "(stop the other, or run this one with --private) [anotherManager]"
    }
}

/// The sound side of a config: S2's folders, S1's default and limits. Checked at start and on
/// every reload.
struct SoundSettings {
    let lookup: SoundLookup
    let defaultName: String
    let maxDuration: Double
    let maxBytes: Int

    /// - Throws: ``ConfigError`` when `sounds.default` names no sound in the folders (S1 falls back
    ///   to it, so it must exist).
    init(config: InterludeConfig, home: String?, environment env: [String: String]) throws(ConfigError) {
        let dataHome = env["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory() + "/.local/share"
        lookup = SoundLookup(appFolders: config.strings("sounds.appFolders"),
                             userFolder: config.string("sounds.userFolder") ?? dataHome + "/interlude/sounds",
                             projectFolder: home.map { $0 + "/Sounds" },
                             dataDirs: SoundLookup.standardDataDirs(environment: env),
                             theme: config.string("sounds.theme") ?? "freedesktop")
        defaultName = config.string("sounds.default") ?? "default"
        guard case .file = lookup.resolve(defaultName) else {
            let (file, line) = config.place(of: "sounds.default")
            throw ConfigError(file: file, line: line, key: "sounds.default",
                              message: "no sound named \(defaultName) in the sound folders", code: "configBadValue")
        }
        maxDuration = config.number("sounds.maxDurationSeconds")
        maxBytes = Int(config.number("sounds.maxSampleBytes"))
    }
}

/// The daemon's signals: SIGINT and SIGTERM stop it (status 0), SIGHUP reloads its config (as
/// `interlude reload`, the unit's `ExecReload`, does over the socket), each watched by a dispatch signal source. Written outside main.swift:
/// signal handlers in main-actor code trap under Swift 6 (DESIGN.md).
///
/// On Linux libdispatch catches a watched signal with a handler of its own (`sigaction`; the
/// daemon's `/proc/PID/status` shows SIGINT, SIGTERM and SIGHUP caught), installed when the source
/// is registered, on libdispatch's manager thread, after `resume()`. Until then the signal has the
/// disposition it had, and the main thread, parked in `sigsuspend` with every signal unblocked,
/// takes it. The stop signals were watched only after the socket opened, and only after they were
/// set to `SIG_IGN`: a SIGTERM sent as soon as the socket answered (a service manager stopping a
/// daemon it has just started; `DaemonSignalEndToEndTests` on a loaded CI machine) ended the
/// daemon by its default action (exit by signal 15, no "stopping") or, after `SIG_IGN`, was
/// dropped and the daemon ran on. In 40 starts each sent SIGTERM once its socket answered, 3 hung
/// and 3 died so. Now each is watched before the socket opens, the start waits until libdispatch
/// has registered it (its registration handler), and its disposition is not touched: a signal
/// that comes before is taken by its default action, which at that point ends a daemon that has
/// served nothing.
enum SignalWatch {
    /// The sources, kept for the process's life.
    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []
    private static let lock = NSLock()

    /// Watches `signals`, calling `handler` on a queue of its own for each one received; returns
    /// once every one is registered (its handler installed). Watched for the process's life.
    static func watch(_ signals: [Int32], label: String, _ handler: @escaping @Sendable () -> Void) async {
        let queue = DispatchQueue(label: label)
        let registered = DispatchGroup()
        let made = signals.map { sig -> DispatchSourceSignal in
            let s = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            registered.enter()
            s.setRegistrationHandler { registered.leave() }
            s.setEventHandler { @Sendable in handler() }
            s.resume()
            return s
        }
        lock.withLock { sources += made }
        await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in registered.notify(queue: queue) { k.resume() } }
    }
}

/// SIGHUP's reload: watched from the start (``SignalWatch``), done once the daemon can reload
/// (``setHandler(_:)``); a SIGHUP that came before is done then, once.
final class ReloadRequest: @unchecked Sendable {
    // `@unchecked Sendable`: `handler` and `pending` only under `lock`.
    private let lock = NSLock()
    private var handler: (@Sendable () -> Void)?
    private var pending = false

    /// A SIGHUP: reloads now if the daemon can, else when it can.
    func signal() {
        let run: (@Sendable () -> Void)? = lock.withLock {
            if handler == nil { pending = true }
            return handler
        }
        run?()
    }

    /// What a reload does; runs it at once if a SIGHUP came before.
    func setHandler(_ body: @escaping @Sendable () -> Void) {
        let now: Bool = lock.withLock {
            handler = body
            defer { pending = false }
            return pending
        }
        if now { body() }
    }
}

/// Lets a part of the daemon ask the main loop to stop with an exit status (a lost manager
/// claim), as SIGTERM does with 0.
final class ExitRequest: @unchecked Sendable {
    private let lock = NSLock()
    private var status: Int32?
    private var waiter: (() -> Void)?

    /// Asks to stop with `status` (the first request wins).
    func request(_ status: Int32) {
        let wake: (() -> Void)? = lock.withLock {
            if self.status == nil { self.status = status }
            defer { waiter = nil }
            return waiter
        }
        wake?()
    }

    /// Calls `wake` once a request is made (at once if one was made already).
    func onRequest(_ wake: @escaping () -> Void) {
        let now: Bool = lock.withLock {
            if status != nil { return true }
            waiter = wake
            return false
        }
        if now { wake() }
    }

    /// The status asked for, or nil.
    var requested: Int32? { lock.withLock { status } }
}

/// Waits for SIGINT or SIGTERM (returns 0), or a request of `exitRequest` (returns its status).
/// Written outside main.swift: signal handlers in main-actor code trap under Swift 6 (DESIGN.md).
func waitForTerminationSignal(orParentExit watchParent: Bool, or exitRequest: ExitRequest) async -> Int32 {
    let parent = getppid()
    signal(SIGPIPE, SIG_IGN)
    await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
        let once = OnceFlag()
        // SIGINT and SIGTERM request a stop with 0 (watched since the start, SignalWatch).
        exitRequest.onRequest { if once.claim() { k.resume() } }
        let queue = DispatchQueue(label: "interlude.parent")
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
    return exitRequest.requested ?? 0
}

/// Keeps the parent-watch sources (`--exit-with-parent`) alive for the process's life.
enum SignalSources {
    nonisolated(unsafe) static var timers: [DispatchSourceTimer] = []
    nonisolated(unsafe) static var reads: [DispatchSourceRead] = []
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
