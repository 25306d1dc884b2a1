import Foundation
import InterludeClient
import InterludeCommandLine
import InterludePolicy
import InterludeWire

/// The `interlude` command: the client library's first user. It links the client library only,
/// so that `interlude play` starts as fast as `pactl` (issue 3, README "Benchmarks"); the
/// commands that play audio of their own (session, interrupt, scenario, demo) are handed to
/// `interlude-audio`, which links libpulse and libsndfile (see `handOff`).
enum CLI {
    /// This CLI's version (the daemon's is in `interlude status`).
    static let version = "0.1.0"

    static let usage = """
    usage: interlude [--socket PATH] COMMAND [OPTIONS]

    Commands:
      status [--json]                         sessions, their state and duck level, streams matched, MPRIS players
      play NAME|PATH [--volume 0..1]          play a sound through the daemon (S1-S3)
      ringer silent|ring                      the ringer switch (A12)
      reload                                  the daemon re-reads its config files (like SIGHUP); a bad file is refused
      session --app ID --category C [--mode M] [--option O]... (--tone HZ | --file PATH)
              [--for SECONDS] [--accepts-delay] [--ignore-interruptions]
                                              a well-behaved reference app; prints its events as JSON lines
      interrupt call|prompt --for SECONDS [--tone HZ]
                                              act as a call or a navigation prompt for that long
      watch                                   print every event of the daemon as JSON lines (hidden previews honoured)

    Notifications (POLICY.md part N):
      notify --app ID --title T [--subtitle S] [--body B] [--level passive|active|timeSensitive|critical]
             [--sound NAME|PATH|none] [--critical-volume V] [--thread T] [--id ID] [--sender S]
             [--category C] [--relevance 0..1] [--promotional] [--alert-once] [--call] [--badge N]
             [--in SECONDS [--repeats true] | --at TIME] [--json]
                                              deliver a notification as app ID; prints the decision and its rules;
                                              silent without --sound (as over the protocol): --sound default asks for the default;
                                              TIME: HH:MM (next), 2026-12-01T09:00[:00.25] (local), …Z or …+01:00, or epoch seconds
      explain ID [--app APP]                  the rules that decided a notification (N16)
      focus on NAME [--for S | --until TIME] | off | status [--json]
                                              focus modes (N7); off prints what the focus silenced; TIME as for notify
      center [--app ID] [remove ID | clear | respond ID ACTION [--text T]]
                                              the notification center; respond is the user's answer to an action (N14)
      categories --app ID CATEGORY [--action ID:TITLE[:OPTION,...]]... [--text-input ACTION:PLACEHOLDER]... [--placeholder BODY]
                                              register a notification category and its actions for app ID (N14)
      badge APP [N]                           set an app's badge (N12)
      auth APP grant|deny|provisional [--critical-alerts on|off] [--time-sensitive on|off] [--sound on|off] [--marketing on|off]
      settings APP [KEY=VALUE…] [--json]      show or change an app's settings (N2; remote=on lets remote notifications in)
      register-remote --app ID [--off] [--json]
                                              as app ID, register (or not) for remote notifications; prints the device topic

    Remote notifications (REMOTE.md), as a provider; run by interlude-push:
      push --broker URL --device ID (--app APP --title T [--body B] [--subtitle S] [--level L] [--sound S] [--thread T]
           [--sender S] [--identifier ID] [--id MSGID] | --stdin [--raw]) [--username U] [--password-file F]
           [--ca-file F] [--topic-prefix P] [--wait-receipt] [--timeout S]
                                              publish one notification (or JSON lines from stdin with --stdin) and print receipts
      scenario run FILE [--record FILE.wav] [--plot FILE.svg] [--connect] [--verbose]
                                              run a scenario (README "Scenario files") on a private daemon and check it
      demo                                    the main job in one go: music, prompt, podcast, call, notification sound

    The socket is --socket, else $INTERLUDE_SOCKET, else $XDG_RUNTIME_DIR/interlude/socket.
    """

    /// `interlude COMMAND --help`: the usage lines of that command (its line and the indented
    /// lines that continue it); nil for a command it does not know.
    static func help(for command: String) -> String? {
        var out: [String] = []
        var inside = false
        for line in usage.split(separator: "\n", omittingEmptySubsequences: false) {
            let text = line.drop { $0 == " " }
            let indent = line.count - text.count
            if indent == 2, text.hasPrefix(command + " ") || text == command { inside = true; out.append(String(line)); continue }
            if inside, indent > 2 { out.append(String(line)); continue }
            inside = false
        }
        return out.isEmpty ? nil : "usage: interlude [--socket PATH] \(out.map { $0.trimmingCharacters(in: .whitespaces) }.first!)" +
            out.dropFirst().map { "\n" + $0 }.joined()
    }

    /// The commands `interlude-audio` runs.
    static let audioCommands: Set<String> = ["session", "interrupt", "scenario", "demo"]
    /// The commands `interlude-push` runs (it links libmosquitto).
    static let pushCommands: Set<String> = ["push"]

    static func run(_ argv: [String]) async -> Int32 {
        let line = CommandInvocation(argv)
        if let problem = line.usageProblem { return CommandOutput.fail(problem, code: 2) }
        guard let command = line.command else { CommandOutput.write(Data((usage + "\n").utf8), to: STDERR_FILENO); return 2 }
        let (socket, rest) = (line.socket, line.rest)
        if rest.contains("--help") || rest.contains("-h"), let help = help(for: command) { print(help); return 0 }
        if audioCommands.contains(command) { return handOff(argv) }
        if pushCommands.contains(command) { return handOff(argv, to: "interlude-push") }
        do {
            switch command {
            case "status": return try await status(socket: socket, rest)
            case "play": return try await play(socket: socket, rest)
            case "ringer": return try await ringer(socket: socket, rest)
            case "reload": return try await reload(socket: socket, rest)
            case "watch": return try await watch(socket: socket, rest)
            case "notify": return try await NotificationCommands.notify(socket: socket, rest)
            case "explain": return try await NotificationCommands.explain(socket: socket, rest)
            case "focus": return try await NotificationCommands.focus(socket: socket, rest)
            case "center": return try await NotificationCommands.center(socket: socket, rest)
            case "categories": return try await NotificationCommands.categories(socket: socket, rest)
            case "badge": return try await NotificationCommands.badge(socket: socket, rest)
            case "auth": return try await NotificationCommands.auth(socket: socket, rest)
            case "settings": return try await NotificationCommands.settings(socket: socket, rest)
            case "register-remote": return try await NotificationCommands.registerRemote(socket: socket, rest)
            case "help", "--help", "-h": print(usage); return 0
            case "--version", "version": print("interlude \(version) (protocol \(interludeProtocolVersion))"); return 0
            default:
                // `interlude --json status`: options go after the command (only --socket may come first).
                let hint = command.hasPrefix("-") ? " (options go after the command; only --socket may come before it)" : ""
                return CommandOutput.fail("unknown command \(CommandOutput.text(command))\(hint)\n\(usage)", code: 2)
            }
        } catch {
            return CommandOutput.fail(error)
        }
    }

    /// Replaces this process with `interlude-audio` and the same arguments: the one installed
    /// beside this executable, else the first on `PATH`. Returns only when neither can run.
    static func handOff(_ argv: [String], to executable: String = "interlude-audio") -> Int32 {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let beside = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent(executable).path
        let args = [executable] + argv
        var cargs: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        if FileManager.default.isExecutableFile(atPath: beside) { execv(beside, &cargs) }
        execvp(executable, &cargs)
        let why = String(cString: strerror(errno))
        return CommandOutput.fail("cannot run \(executable) (beside \(me) or on PATH): \(why)")
    }

    // MARK: status

    static func status(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: ["json"], options: [])
        guard a.positionals.isEmpty else { throw Arguments.UsageError(description: "status takes no arguments but --json") }
        let s = try InterludeClient.request(socket: socket, app: "org.interlude.CLI", WireMethod.status, StatusParams(), as: StatusResult.self)
        if a.has("json") {
            let enc = JSONEncoder()
            enc.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: UnsafeText.jsonForTerminal(try enc.encode(s)), as: UTF8.self))
            return 0
        }
        print("interluded \(s.version) — audio server \(s.audioConnected ? "connected" + (s.audioServer.map { " (\($0))" } ?? "") : "NOT connected"), ringer \(s.ringer)")
        if let why = s.soundsUnavailable { print("  sounds: \(CommandOutput.text(why))") }
        if let b = s.bus {
            switch b.mode {
            case "server": print("bus: server, owns org.freedesktop.Notifications as \(b.nameOwner ?? "?")")
            case "companion": print("bus: companion of \(b.nameOwner ?? "?"), the owner of org.freedesktop.Notifications")
            default: print("bus: off\(b.note.map { " (\($0))" } ?? "")")
            }
        }
        if s.sessions.isEmpty { print("no sessions") }
        for x in s.sessions {
            var line = "\(x.session)  \(x.app)  \(x.category.rawValue)/\(x.mode.rawValue)"
            if !x.options.isEmpty { line += " [\(x.options.map(\.rawValue).joined(separator: ","))]" }
            if x.implicit { line += " (implicit, A10)" }
            line += "  \(x.state.rawValue)\(x.playing ? ", playing" : "")"
            if x.ducked { line += ", ducked \(CommandOutput.fmt(x.duckDb)) dB" }
            if x.muted { line += ", muted" }
            if !x.interruptedBy.isEmpty {
                line += ", interrupted by \(x.interruptedBy.map(\.rawValue).joined(separator: ","))" + (x.interruptedByOmitted.map { " and \($0) more" } ?? "")
            }
            print(CommandOutput.text(line))
            for st in x.streams {
                print("    stream \(st.index)  pid \(st.pid.map(String.init) ?? "?")  role \(CommandOutput.text(st.role ?? "-"))  \(st.corked ? "paused" : "running")"
                      + "  volume \(CommandOutput.fmt(st.userVolumeDb)) dB, gain \(CommandOutput.fmt(st.gainDb)) dB\(st.muted ? ", muted" : "")")
            }
            if let n = x.streamsOmitted { print("    … and \(n) more streams not listed (status lists \(StatusResult.maxListedPerSession) per session)") }
        }
        if let n = s.sessionsOmitted { print("… and \(n) more sessions not listed (status lists at most \(StatusResult.maxSessionsListed), and what fits a page of server.maxOutputBytes, choosing those doing something before idle ones)") }
        for p in s.players ?? [] {
            print("player \(CommandOutput.text(p.player))  \(p.session)  pid \(p.pid.map(String.init) ?? "?")  \(p.status)"
                  + (p.canControl ? (p.canPause ? "" : ", cannot pause") : ", cannot be controlled")
                  + "  Interlude: \(p.action)\(p.rule.map { " [\($0)]" } ?? "")")
        }
        if let n = s.playersOmitted { print("… and \(n) more players not listed (what fits a page of server.maxOutputBytes)") }
        if !s.unmatchedStreams.isEmpty {
            print("unmatched streams: \(s.unmatchedStreams.map { String($0.index) }.joined(separator: ", "))"
                  + (s.unmatchedStreamsOmitted.map { " and \($0) more" } ?? ""))
        }
        if !s.samples.isEmpty { print("sample cache: \(s.samples.joined(separator: ", "))") }
        if let files = s.configFiles { print("config: \(files.isEmpty ? "built-in defaults" : files.map(CommandOutput.text).joined(separator: ", "))") }
        return 0
    }

    // MARK: play, ringer, watch

    static func play(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: [], options: ["volume"])
        guard a.positionals.count == 1 else { throw Arguments.UsageError(description: "play takes one NAME or PATH") }
        var sound = a.positionals[0]
        if sound.contains("/") { sound = URL(fileURLWithPath: sound).standardizedFileURL.path }
        // One write, one round trip (hello and sound.play pipelined): this is the command whose
        // latency a user hears (Scripts/bench).
        let r = try InterludeClient.request(socket: socket, app: "org.interlude.CLI", WireMethod.soundPlay,
                                            SoundPlayParams(sound: sound, volume: try a.double("volume", in: 0...1)),
                                            as: SoundPlayResult.self)
        if let w = r.warning {
            CommandOutput.warn("warning: \(w.message) — played \(r.played) instead")
        }
        print("played \(r.played) (\(CommandOutput.fmt(r.duration)) s)")
        return 0
    }

    static func ringer(socket: String?, _ argv: [String]) async throws -> Int32 {
        guard argv.count == 1, argv[0] == "silent" || argv[0] == "ring" else {
            throw Arguments.UsageError(description: "ringer takes silent or ring")
        }
        _ = try InterludeClient.request(socket: socket, app: "org.interlude.CLI", WireMethod.ringerSet,
                                        RingerParams(mode: argv[0]), as: JSONValue.self)
        print("ringer \(argv[0])")
        return 0
    }

    /// `interlude reload`: the daemon re-reads its config files (as on SIGHUP); a bad file is
    /// refused with file, line and key, and the running config stays (exit 1).
    static func reload(socket: String?, _ argv: [String]) async throws -> Int32 {
        guard argv.isEmpty else { throw Arguments.UsageError(description: "reload takes no arguments") }
        let r = try InterludeClient.request(socket: socket, app: "org.interlude.CLI", WireMethod.configReload,
                                            ReloadParams(), as: ReloadResult.self)
        print("config reloaded from \(r.files.isEmpty ? "built-in defaults" : r.files.map(CommandOutput.text).joined(separator: ", "))")
        if let kept = r.keptUntilRestart, !kept.isEmpty {
            print("not in force until the daemon restarts (they keep the values it started with): \(kept.joined(separator: ", "))")
        }
        for w in r.warnings ?? [] { print("warning: \(CommandOutput.terminalLines(w))") }
        if let n = r.dropped, n > 0 {
            print("dropped \(n) notification\(n == 1 ? "" : "s"), the oldest over the lowered center limits (N11; each app was told)")
        }
        return 0
    }

    static func watch(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: [], options: [])
        guard a.positionals.isEmpty else { throw Arguments.UsageError(description: "watch takes no arguments") }
        let c = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        try await c.subscribe()
        for await e in c.events { CommandOutput.printJSONLine(e) }
        // The events end only when the connection does: the daemon stopped or dropped us.
        return CommandOutput.fail("the daemon closed the connection")
    }
}
