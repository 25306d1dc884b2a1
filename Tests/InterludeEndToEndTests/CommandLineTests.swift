import Foundation
import Testing
import InterludeClient
import InterludePolicy
import InterludeScenario
import InterludeWire
import InterludeTestSupport

/// The `interlude` executable as a user runs it, against a real `interluded` on a real PulseAudio
/// server: the client-only commands answer themselves, the audio commands are handed to
/// `interlude-audio` (issue 3: `interlude` links neither libpulse nor libsndfile), and errors exit
/// with status 2 (usage) or 1 (the daemon or the server) and a message on standard error.
@Suite(.serialized) struct CommandLineEndToEndTests {
    struct Run { var status: Int32; var out: String; var err: String }

    /// Runs the built `interlude` with `args` and waits for it (at most `timeout` seconds).
    func interlude(_ args: [String], timeout: Double = 20) throws -> Run {
        guard let path = ScenarioRunner.siblingExecutable("interlude") else { throw CocoaError(.fileNoSuchFile) }
        let r = try ChildProcess.run(path, args, timeout: timeout)
        return Run(status: r.status, out: r.stdout, err: r.stderr)
    }

    /// Collects everything a pipe delivers on a thread of its own.
    final class ReadAll: @unchecked Sendable {
        private var data = Data()
        private let done = DispatchSemaphore(value: 0)
        init(_ h: FileHandle) {
            Thread.detachNewThread { [self] in data = h.readDataToEndOfFile(); done.signal() }
        }
        func text() -> String { done.wait(); return String(decoding: data, as: UTF8.self) }
    }

    /// A daemon in a fresh work folder whose config grants every app (N1), on the folder's socket.
    func grantingDaemon(_ name: String) throws -> (WorkFolder, DaemonProcess) {
        let w = try WorkFolder(name)
        try w.config(#"{ authorization: { default: "grant" } }"#)
        return (w, try DaemonProcess(socket: w.socket, work: w.path, environment: w.environment))
    }

    @Test func theCLILinksNeitherLibpulseNorLibsndfile() throws {
        guard let path = ScenarioRunner.siblingExecutable("interlude"),
              let audio = ScenarioRunner.siblingExecutable("interlude-audio") else { throw CocoaError(.fileNoSuchFile) }
        // The dynamic section names the libraries the loader maps at start-up.
        func needed(_ file: String) throws -> String {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = ["ldd", file]
            let out = Pipe()
            p.standardOutput = out
            try p.run()
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            return text
        }
        let cli = try needed(path)
        #expect(!cli.contains("libpulse"), "interlude maps libpulse:\n\(cli)")
        #expect(!cli.contains("libsndfile"), "interlude maps libsndfile:\n\(cli)")
        #expect(try needed(audio).contains("libpulse"))
        // `push` runs in interlude-push (issue 11): libmosquitto stays out of `interlude`.
        #expect(!cli.contains("libmosquitto"), "interlude maps libmosquitto:\n\(cli)")
        if let push = ScenarioRunner.siblingExecutable("interlude-push") { #expect(try needed(push).contains("libmosquitto")) }
        else { Issue.record("no interlude-push beside interlude") }
    }

    @Test func usageErrorsExitTwoFromBothExecutables() throws {
        let unknown = try interlude(["frobnicate"])
        #expect(unknown.status == 2)
        #expect(unknown.err.contains("unknown command frobnicate"))
        // The user's arguments are quoted escaped (a script may pass an app's text): no escape
        // sequence or direction override reaches the terminal, in either executable.
        for args in [["frob\u{1B}[31m\u{202E}"], ["session", "--app", "org.example.Music", "--category", "lo\u{1B}[2Jud"],
                     ["notify", "--bogus\u{202E}x"], ["push", "--bogus\u{1B}[31m"], ["push", "--broker", "mqtt://127.0.0.1:1", "--device", "d", "--app", "a.b", "--title", "t", "--timeout", "x\u{202E}"],
                     ["scenario", "run", "/nonexistent/x\u{1B}[31m.json"], ["--socket", "/nonexistent\u{202E}/s", "status"]] {
            let r = try interlude(args)
            #expect(r.status == 2 || (r.status == 1 && args.contains("--socket")), "\(args): \(r)")
            #expect(!r.err.unicodeScalars.contains { $0 != "\n" && UnsafeText.mustEscape($0) }, "\(args): \(r.err.debugDescription)")
            #expect(r.err.contains("\\u{1B}") || r.err.contains("\\u{202E}"), "\(args): \(r.err.debugDescription)")
        }
        // A typed backslash is doubled, as on standard output, so a typed `\u{1B}` does not read
        // like a real ESC (both printed `nope\u{1B}`).
        for (args, typed, real) in [(["nope\\u{1B}"], "nope\\\\u{1B}", "nope\\u{1B}"),
                                    (["session", "--app", "a.b", "--category", "x\\u{1B}"], "x\\\\u{1B}", "x\\u{1B}"),
                                    (["settings", "a.b", "k\\n=on"], "k\\\\n", "k\\n"),
                                    (["notify", "--app", "a.b", "--title", "t", "--badge", "1\\t"], "1\\\\t", "1\\t")] {
            let withTyped = try interlude(args)
            #expect(withTyped.status == 2 && withTyped.err.contains(typed), "\(args): \(withTyped.err.debugDescription)")
            let withReal = try interlude(args.map { $0.replacingOccurrences(of: "\\u{1B}", with: "\u{1B}").replacingOccurrences(of: "\\n", with: "\n")
                                                        .replacingOccurrences(of: "\\t", with: "\t") })
            #expect(withReal.status == 2 && withReal.err.contains(real) && !withReal.err.contains(typed), "\(args): \(withReal.err.debugDescription)")
        }
        // An option-looking word is not an app: `settings -x sound=off` changed an app named "-x".
        for args in [["settings", "--nope"], ["settings", "-x", "sound=off"], ["settings", "org.example.Chat", "--nope"]] {
            let r = try interlude(["--socket", "/nonexistent/socket"] + args)
            #expect(r.status == 2 && r.err.contains("unknown option"), "\(args): \(r)")
        }
        // What a value may be is said in full (`--repeats yes` and `sound=true` are taken).
        let repeats = try interlude(["--socket", "/nonexistent/socket", "notify", "--app", "a.b", "--title", "t", "--in", "60", "--repeats", "maybe"])
        #expect(repeats.status == 2 && repeats.err.contains("--repeats takes true or false (or yes or no)"), "\(repeats)")
        let onOff = try interlude(["--socket", "/nonexistent/socket", "settings", "a.b", "sound=ON"])
        #expect(onOff.status == 2 && onOff.err.contains("sound takes on or off (or true/false, yes/no)"), "\(onOff)")
        // An option before the command: said where it goes.
        let before = try interlude(["--json", "status"])
        #expect(before.status == 2 && before.err.contains("unknown command --json (options go after the command"), "\(before)")
        // Given twice: a setting, the socket (both before any daemon is asked).
        let twice = try interlude(["--socket", "/nonexistent/socket", "settings", "org.example.Chat", "sound=on", "badge=on", "sound=off"])
        #expect(twice.status == 2 && twice.err.contains("sound is given twice; it takes one value"), "\(twice)")
        for args in [["--socket", "/nonexistent/a", "--socket", "/nonexistent/b", "status"],
                     ["--socket=/nonexistent/a", "session", "--app", "a.b", "--socket=/nonexistent/b"]] {
            let r = try interlude(args)
            #expect(r.status == 2 && r.err.contains("--socket is given twice; it takes one value"), "\(args): \(r)")
        }
        // Parsed by interlude-audio: the hand-off keeps the arguments and the exit status.
        let session = try interlude(["session", "--app", "org.example.Music", "--category", "loud"])
        #expect(session.status == 2)
        #expect(session.err.contains("unknown category loud"), "\(session.err)")
        let interrupt = try interlude(["interrupt", "meeting", "--for", "1"])
        #expect(interrupt.status == 2)
        #expect(interrupt.err.contains("interrupt takes call or prompt"), "\(interrupt.err)")
        // Checked before any daemon is asked (it used to start watching whatever followed).
        for extra in [["--bogus"], ["foo", "bar"]] {
            let watch = try interlude(["--socket", "/nonexistent/socket", "watch"] + extra)
            #expect(watch.status == 2, "watch \(extra): \(watch)")
        }
    }

    @Test func noDaemonIsAClearErrorWithStatusOne() throws {
        let r = try interlude(["--socket", "/nonexistent/interlude/socket", "play", "default"])
        #expect(r.status == 1)
        #expect(r.err.contains("no daemon at /nonexistent/interlude/socket"), "\(r.err)")
        // A file or a folder given as the socket is named as what it is (it read "Connection refused").
        let folder = NSTemporaryDirectory() + "interlude-notsocket-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        FileManager.default.createFile(atPath: folder + "/plain", contents: Data("x".utf8))
        for (path, what) in [(folder + "/plain", "a file"), (folder, "a folder")] {
            let r = try interlude(["--socket", path, "status"])
            #expect(r.status == 1 && r.err.contains("\(path) is \(what), not a daemon's socket"), "\(path): \(r)")
        }
    }

    @Test(.enabled(if: AudioServer.required()))
    func playStatusAndAPromptThroughTheRealDaemon() async throws {
        let w = try WorkFolder("cli")
        defer { w.remove() }
        let socket = w.socket
        let daemon = try DaemonProcess(socket: socket, work: w.path, config: false)
        defer { daemon.stop() }

        let play = try interlude(["--socket", socket, "play", "default"])
        #expect(play.status == 0, "\(play.err)")
        #expect(play.out.hasPrefix("played default"), "\(play.out)")

        // The prompt runs in interlude-audio with its own stream: it registers, activates, plays
        // for 0.3 s and deactivates, printing its events as JSON lines.
        let prompt = try interlude(["--socket", socket, "interrupt", "prompt", "--for", "0.3"])
        #expect(prompt.status == 0, "\(prompt.err)")
        let events = prompt.out.split(separator: "\n").compactMap { try? WireCoding.decoder.decode(WireEvent.self, from: Data($0.utf8)) }
        #expect(events.map(\.event).contains("activate"), "\(prompt.out)")
        #expect(events.last?.event == "deactivated", "\(prompt.out)")

        // Its session ends with its process (A9: a closed connection releases its sessions).
        var s: StatusResult?
        for _ in 0..<20 {
            let status = try interlude(["--socket", socket, "status", "--json"])
            #expect(status.status == 0, "\(status.err)")
            s = try WireCoding.decoder.decode(StatusResult.self, from: Data(status.out.utf8))
            if s?.sessions.isEmpty == true { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        #expect(s?.audioConnected == true)
        #expect(s?.sessions.isEmpty == true, "\(String(describing: s?.sessions))")
        #expect(daemon.isRunning)
    }

    /// S1 on the notification path: a notification whose sound file is unusable plays the default
    /// sound, and `interlude notify` says so on standard error (from the daemon's `soundPlayed`).
    @Test(.enabled(if: AudioServer.required()))
    func S1_notifyWithAnUnusableSoundWarnsAndPlaysTheDefault() async throws {
        let w = try WorkFolder("cli-s1")
        defer { w.remove() }
        let (socket, sounds) = (w.socket, w.sounds)
        _ = FileManager.default.createFile(atPath: sounds + "/empty.wav", contents: Data())
        try w.config(#"{ authorization: { default: "grant" } }"#)
        let daemon = try DaemonProcess(socket: socket, work: w.path, environment: w.environment)
        defer { daemon.stop() }

        let bad = try interlude(["--socket", socket, "notify", "--app", "org.example.Chat", "--title", "hi", "--sound", sounds + "/empty.wav", "--id", "s1"])
        #expect(bad.status == 0, "\(bad.err)")
        #expect(bad.out.contains("delivered"), "\(bad.out)")
        #expect(bad.err.contains("warning:") && bad.err.contains("played default instead"), "stderr: \(bad.err)")
        // explain says what played, not only what the decision named (N16 with S1).
        let explained = try interlude(["--socket", socket, "explain", "s1", "--app", "org.example.Chat"])
        #expect(explained.status == 0, "\(explained.err)")
        #expect(explained.out.contains("sound: \(sounds)/empty.wav was requested, default played") && explained.out.contains("[S1]"),
                "\(explained.out)")
        let json = try JSONValue.parse(Data(try interlude(["--socket", socket, "explain", "s1", "--app", "org.example.Chat", "--json"]).out.utf8))
        #expect(json["sound"]?["played"] == .string("default"), "\(json)")

        let good = try interlude(["--socket", socket, "notify", "--app", "org.example.Chat", "--title", "hi again", "--sound", "default", "--id", "s2"])
        #expect(good.status == 0, "\(good.err)")
        #expect(!good.err.contains("warning"), "stderr: \(good.err)")
        let plain = try interlude(["--socket", socket, "explain", "s2", "--app", "org.example.Chat"])
        #expect(!plain.out.contains("sound:"), "a sound that played as decided needs no line: \(plain.out)")

        // Without --sound the CLI asks for no sound, as a protocol request without `sound` does
        // (it used to ask for the default, unlike the protocol).
        let silent = try interlude(["--socket", socket, "notify", "--app", "org.example.Other", "--title", "quiet", "--json"])
        #expect(silent.status == 0, "\(silent.err)")
        let decision = try JSONValue.parse(Data(silent.out.utf8))
        #expect(decision["decision"]?["sound"] == nil, "\(silent.out)")
    }

    /// Issue 8 item 7: what the protocol has, the CLI has. `categories` registers an app's
    /// actions (N14), `center respond` is the user's answer and reaches the app as an
    /// `actionResponse` event, `focus off` says what the focus silenced (N7's missedDuringFocus),
    /// and `COMMAND --help` prints that command's usage.
    /// `notify --at` takes a date-time with a fraction of a second, as it takes epoch seconds
    /// with one (N8: a trigger's time is seconds, not whole seconds).
    @Test func N8_notifyAtTakesFractionalSeconds() async throws {
        let (w, daemon) = try grantingDaemon("cli-at")
        defer { daemon.stop(); w.remove() }
        let s = w.socket
        let cases: [(id: String, at: String, fireAt: Double)] = [
            ("iso", "2030-01-01T09:00:00.25Z", 1_893_488_400.25), ("epoch", "1893488400.5", 1_893_488_400.5),
            ("whole", "2030-01-01T09:00:00Z", 1_893_488_400.0), ("zoned", "2030-01-01T10:00:00.5+01:00", 1_893_488_400.5)]
        for (id, at, _) in cases {
            let sent = try interlude(["--socket", s, "notify", "--app", "org.example.Alarm", "--title", "wake", "--id", id, "--at", at])
            #expect(sent.status == 0, "\(at): \(sent)")
        }
        // A form with something after it (read as its valid start before: 09:00, 09:00:00Z), or
        // not quite one of the forms.
        for wrong in ["09:00:00.x", "09:00:junk", "09::00", "2030-01-01T09:00:00Zjunk", "2030-01-01T09:00:00Z junk",
                      "2030-01-01T09:00:00.25Zjunk", "2030-01-01T09:00:00+01:00:99", "0x10", "9:5", "+9:05", "1.8e9"] {
            let bad = try interlude(["--socket", s, "notify", "--app", "org.example.Alarm", "--title", "x", "--at", wrong])
            #expect(bad.status == 2 && bad.err.contains("epoch seconds"), "\(wrong): \(bad)")
        }
        let cli = try await InterludeClient.connect(socket: s, app: "org.interlude.CLI")
        defer { cli.close() }
        let list = try await cli.call(NotificationMethod.pending, ListNotificationsParams(app: "org.example.Alarm"), as: NotificationListResult.self)
        let fireAt = Dictionary(uniqueKeysWithValues: list.pending.map { ($0.identifier, $0.fireAt) })
        #expect(fireAt == Dictionary(uniqueKeysWithValues: cases.map { ($0.id, $0.fireAt) }), "\(fireAt)")
    }

    /// A stray word after `notify`'s options is refused (a stranger's `--title foo stray words`
    /// was delivered as "foo", the rest dropped), as every other command refuses one.
    @Test func notifyRefusesAStrayWord() throws {
        let r = try interlude(["--socket", "/nonexistent/socket", "notify", "--app", "org.ex.A", "--title", "foo", "stray", "words"])
        #expect(r.status == 2 && r.err.contains("notify takes no argument stray"), "\(r)")
    }

    /// An empty center with a badge left says so, not "empty" above the badge (a stranger's find).
    @Test func anEmptyCenterWithABadgeSaysBoth() async throws {
        let (w, daemon) = try grantingDaemon("cli-empty-badge")
        defer { daemon.stop(); w.remove() }
        let app = try await InterludeClient.connect(socket: w.socket, app: "org.example.Mail")
        _ = try await app.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]), as: JSONValue.self)
        app.close()
        #expect(try interlude(["--socket", w.socket, "badge", "org.example.Mail", "3"]).status == 0)
        let shown = try interlude(["--socket", w.socket, "center", "--app", "org.example.Mail"])
        #expect(shown.status == 0 && shown.out == "no notification in the center; badges as the apps set them:\nbadge  org.example.Mail  3\n", "\(shown)")
        #expect(try interlude(["--socket", w.socket, "badge", "org.example.Mail", "0"]).status == 0)
        #expect(try interlude(["--socket", w.socket, "center", "--app", "org.example.Mail"]).out == "the notification center is empty\n")
    }

    /// `center respond ID ACTION` without `--app` finds the notification in the whole center, page
    /// by page (a stranger's, on the third page of a center of 8 apps, was "no notification … in the
    /// center": only the first page was read).
    @Test func respondWithoutAppFindsANotificationPastTheFirstPage() async throws {
        let (w, daemon) = try grantingDaemon("cli-respond-pages")
        defer { daemon.stop(); w.remove() }
        for i in 0..<3 {
            let app = try await InterludeClient.connect(socket: w.socket, app: "org.example.App\(i)")
            _ = try await app.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]), as: JSONValue.self)
            for k in 0..<50 {
                _ = try await app.call(NotificationMethod.add, AddNotificationParams(identifier: "n\(k)", title: "filler \(k)"), as: AddNotificationResult.self)
            }
            app.close()
        }
        #expect(try interlude(["--socket", w.socket, "categories", "--app", "org.example.Chat", "ask", "--action", "yes:Yes"]).status == 0)
        #expect(try interlude(["--socket", w.socket, "notify", "--app", "org.example.Chat", "--title", "ok?", "--id", "q9", "--category", "ask"]).status == 0)
        let c = try await InterludeClient.connect(socket: w.socket, app: "org.interlude.CLI")
        defer { c.close() }
        let first = try await c.call(NotificationMethod.delivered, ListNotificationsParams(all: true), as: NotificationListResult.self)
        #expect(!first.notifications.contains { $0.identifier == "q9" }, "q9 is past the first page")
        let answer = try interlude(["--socket", w.socket, "center", "respond", "q9", "yes"])
        #expect(answer.status == 0 && answer.out.contains("responded yes to org.example.Chat/q9"), "\(answer)")
    }

    @Test func categoriesRespondFocusOffAndHelp() async throws {
        let (w, daemon) = try grantingDaemon("cli-n14")
        defer { daemon.stop(); w.remove() }
        let s = w.socket

        let help = try interlude(["explain", "--help"])
        #expect(help.status == 0 && help.out.contains("explain ID [--app APP]"), "\(help)")
        let badAction = try interlude(["--socket", s, "categories", "--app", "org.example.Chat", "reply", "--action", "nope"])
        #expect(badAction.status == 2 && badAction.err.contains("ID:TITLE"), "\(badAction)")

        let reg = try interlude(["--socket", s, "categories", "--app", "org.example.Chat", "reply",
                                 "--action", "yes:Yes", "--action", "no:No:destructive", "--action", "say:Say:foreground",
                                 "--text-input", "say:Your answer"])
        #expect(reg.status == 0 && reg.out.contains("category reply with 3 actions (yes, no, say)"), "\(reg)")

        let app = try await InterludeClient.connect(socket: s, app: "org.example.Chat")
        try await app.subscribe()
        let sent = try interlude(["--socket", s, "notify", "--app", "org.example.Chat", "--title", "lunch?", "--id", "q1", "--category", "reply"])
        #expect(sent.status == 0, "\(sent)")
        let answer = try interlude(["--socket", s, "center", "--app", "org.example.Chat", "respond", "q1", "say", "--text", "at noon"])
        #expect(answer.status == 0 && answer.out.contains("responded say"), "\(answer)")
        let response = await withTaskGroup(of: WireEvent?.self) { g in
            // The app's own copy (PROTOCOL.md notification.respond), not the watchers' one.
            g.addTask { for await e in app.events where e.event == NotificationEventName.actionResponse && e.data["actionIdentifier"] != nil { return e }; return nil }
            g.addTask { try? await Task.sleep(nanoseconds: 5_000_000_000); return nil }
            let first = await g.next() ?? nil
            g.cancelAll()
            return first
        }
        #expect(response?.data["actionIdentifier"]?.stringValue == "say", "\(String(describing: response))")
        #expect(response?.data["notificationIdentifier"]?.stringValue == "q1", "\(String(describing: response))")
        #expect(response?.data["text"]?.stringValue == "at noon", "\(String(describing: response))")
        let unknown = try interlude(["--socket", s, "center", "--app", "org.example.Chat", "respond", "q1", "maybe"])
        #expect(unknown.status == 1, "an action the category does not have is refused: \(unknown)")

        #expect(try interlude(["--socket", s, "focus", "on", "sleep"]).status == 0)
        _ = try interlude(["--socket", s, "notify", "--app", "org.example.Chat", "--title", "while asleep", "--id", "m1"])
        let off = try interlude(["--socket", s, "focus", "off"])
        #expect(off.status == 0, "\(off)")
        #expect(off.out.contains("missed during sleep: 1 notification (org.example.Chat: 1)") && off.out.contains("while asleep"), "\(off.out)")

        // --json: the missedDuringFocus event's line, then the focus status's; settings as one line.
        #expect(try interlude(["--socket", s, "focus", "on", "sleep", "--json"]).status == 0)
        _ = try interlude(["--socket", s, "notify", "--app", "org.example.Chat", "--title", "asleep again", "--id", "m2"])
        let offJSON = try interlude(["--socket", s, "focus", "off", "--json"])
        let lines = offJSON.out.split(separator: "\n").map { try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8)) }
        #expect(offJSON.status == 0 && lines.count == 2, "\(offJSON)")
        #expect(lines.first??["event"]?.stringValue == NotificationEventName.missedDuringFocus, "\(offJSON.out)")
        func count(_ v: JSONValue?) -> Int? { if case let .array(a)? = v { a.count } else { nil } }
        #expect(count(lines.first??["data"]?["missed"]) == 1, "\(offJSON.out)")
        #expect(lines.last??["focus"] == nil && (count(lines.last??["modes"]) ?? 0) > 0, "\(offJSON.out)")
        let statusJSON = try interlude(["--socket", s, "focus", "status", "--json"])
        #expect((try? JSONDecoder().decode(FocusStatusResult.self, from: Data(statusJSON.out.utf8)))?.focus == nil, "\(statusJSON)")
        let settingsJSON = try interlude(["--socket", s, "settings", "org.example.Chat", "sound=off", "--json"])
        let settings = try? JSONDecoder().decode(NotificationAppSettings.self, from: Data(settingsJSON.out.utf8))
        #expect(settingsJSON.status == 0 && settings?.sound == false && settingsJSON.out.split(separator: "\n").count == 1, "\(settingsJSON)")
        #expect(daemon.isRunning)
    }

    /// Issue 10: `interlude reload` and SIGHUP re-read the config while sessions and ducks stay: a
    /// focus schedule added to the user's file takes effect at once; a broken file is refused with
    /// file and line, and the running config keeps working.
    @Test func reloadAppliesAScheduleAndRefusesABrokenFileKeepingSessionsAndDucks() async throws {
        let w = try WorkFolder("cli-reload")
        defer { w.remove() }
        let base = #"{ timeZone: "UTC", authorization: { default: "grant" } }"#
        try w.config(base)
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, environment: w.environment)
        defer { daemon.stop() }
        let s = w.socket

        let music = try await InterludeClient.connect(socket: s, app: "org.example.Music")
        let m = try await music.register(category: .playback)
        _ = try await music.activate(m)
        let nav = try await InterludeClient.connect(socket: s, app: "org.example.Nav")
        let p = try await nav.register(category: .playback, mode: .voicePrompt, options: [.duckOthers])
        _ = try await nav.activate(p)
        func musicState() async throws -> SessionStatus? { try await music.status().sessions.first { $0.session == m } }
        #expect(try await musicState()?.ducked == true)
        #expect(try interlude(["--socket", s, "focus", "status"]).out.contains("focus: off"))

        // A window from an hour ago to an hour ahead, on the day it starts (N8), in UTC.
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        let start = Date().addingTimeInterval(-3600), end = Date().addingTimeInterval(3600)
        let days = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
        func hm(_ d: Date) -> String { String(format: "%02d:%02d", utc.component(.hour, from: d), utc.component(.minute, from: d)) }
        let scheduled = """
        { timeZone: "UTC", authorization: { default: "grant" },
          focusModes: { work: { schedule: [{ weekdays: ["\(days[utc.component(.weekday, from: start) - 1])"], start: "\(hm(start))", end: "\(hm(end))" }] } } }
        """
        try w.config(scheduled)
        let reload = try interlude(["--socket", s, "reload"])
        #expect(reload.status == 0 && reload.out.contains("config reloaded from") && reload.out.contains(w.path + "/interlude.json5"), "\(reload)")
        #expect(!reload.out.contains("until the daemon restarts"), "nothing restart-only changed: \(reload.out)")
        #expect(try interlude(["--socket", s, "focus", "status"]).out.contains("focus: work (schedule)"))
        #expect(try await musicState()?.state == .active, "the session stays")
        #expect(try await musicState()?.ducked == true, "the duck stays")
        let status = try interlude(["--socket", s, "status"])
        #expect(status.out.contains("config: ") && status.out.contains(w.path + "/interlude.json5"), "\(status.out)")

        // A broken file: refused with file and line; the schedule in force stays.
        try w.config("{\n  timeZone: 'UTC',\n  focusModes: { work: { schedule: [ }\n}")
        let broken = try interlude(["--socket", s, "reload"])
        #expect(broken.status == 1, "\(broken)")
        #expect(broken.err.contains(w.path + "/interlude.json5:3") && broken.err.contains("running config stays"), "\(broken.err)")
        #expect(try interlude(["--socket", s, "focus", "status"]).out.contains("focus: work (schedule)"))
        let app = try await InterludeClient.connect(socket: s, app: "org.example.Chat")
        _ = try await app.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .sound]), as: AuthorizationResult.self)
        let silenced = try await app.call(NotificationMethod.add, AddNotificationParams(title: "during work", sound: "default"), as: AddNotificationResult.self)
        #expect(silenced.decision.rules.contains("N7"), "the old config's focus still silences: \(silenced.decision.rules)")

        // SIGHUP with the broken file: refused, the daemon lives; with the base file: focus off.
        daemon.process.signal(SIGHUP)
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(daemon.isRunning)
        try w.config(base)
        daemon.process.signal(SIGHUP)
        var off = false
        for _ in 0..<40 {
            guard !off else { break }
            try await Task.sleep(nanoseconds: 50_000_000)
            off = try interlude(["--socket", s, "focus", "status"]).out.contains("focus: off")
        }
        #expect(off, "SIGHUP put the base config in force")
        #expect(try await musicState()?.ducked == true)

        // A server limit is read once at start: the reload says it is not in force yet.
        try w.config(#"{ timeZone: "UTC", authorization: { default: "grant" }, server: { maxClients: 32, maxSessions: 100 } }"#)
        let limits = try interlude(["--socket", s, "reload"])
        #expect(limits.status == 0 && limits.out.contains("not in force until the daemon restarts")
                && limits.out.contains("server.maxClients"), "\(limits.out)")
        let keptLine = limits.out.split(separator: "\n").first { $0.contains("until the daemon restarts") } ?? ""
        #expect(!keptLine.contains("server.maxSessions"), "a session limit follows a reload: \(keptLine)")
        // maxSessions 100 under the default 1,024 per client: accepted, and said (contradictions).
        // (1,024 is set in the built-in Config/interlude.json5, and named there.)
        #expect(limits.out.contains("warning: server.maxSessionsPerClient 1024 (") && limits.out.contains("/Config/interlude.json5:")
                && limits.out.contains(") is above server.maxSessions 100 (\(w.path)/interlude.json5:1)"), "\(limits.out)")
        let log = LogFile.waitFor("reload refused, the running config stays", in: w.path + "/log")
        #expect(log.contains("reload refused, the running config stays"), "\(log)")
        #expect(daemon.isRunning)
    }

    /// A `--config` folder deleted after the start: `interlude reload` and SIGHUP are refused with
    /// `configNotFound` naming the folder, as the start is (exit 78); the running config stays (it
    /// used to reload silently from the remaining files, the user's settings back at their
    /// defaults) and the daemon keeps running.
    /// N11: a lowered center limit applies at once, on `interlude reload` and when the daemon
    /// starts with a config lowered while it was stopped (a stranger's find: the center stayed over
    /// the new limit until the next add, and the apps were told nothing until then).
    @Test func N11_aLoweredCenterLimitAppliesAtReloadAndAtStart() async throws {
        let w = try WorkFolder("cli-reload-limits")
        defer { w.remove() }
        func limits(perApp: Int, total: Int) throws {
            try w.config(#"{ timeZone: "UTC", authorization: { default: "grant" }, bursts: { maxDeliveredPerApp: \#(perApp), maxDeliveredTotal: \#(total) } }"#)
        }
        try limits(perApp: 10, total: 10)
        var daemon: DaemonProcess? = try DaemonProcess(socket: w.socket, work: w.path, environment: w.environment)
        defer { daemon?.stop() }
        let s = w.socket
        let chat = try await InterludeClient.connect(socket: s, app: "org.example.Chat")
        let news = try await InterludeClient.connect(socket: s, app: "org.example.News")
        for app in [chat, news] {
            _ = try await app.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]), as: AuthorizationResult.self)
        }
        for i in 0..<5 { _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "c\(i)", title: "c"), as: AddNotificationResult.self) }
        for i in 0..<3 { _ = try await news.call(NotificationMethod.add, AddNotificationParams(identifier: "n\(i)", title: "n"), as: AddNotificationResult.self) }
        let chatEvents = chat.events
        func center() async throws -> [String] {
            let user = try await InterludeClient.connect(socket: s, app: "org.interlude.CLI")
            defer { user.close() }
            return try await user.wholeCenter(all: true).notifications.map { "\($0.app)/\($0.identifier)" }
        }
        #expect(try await center().count == 8)

        try limits(perApp: 3, total: 4)
        let reload = try interlude(["--socket", s, "reload"])
        #expect(reload.status == 0, "\(reload)")
        #expect(reload.out.contains("dropped 4 notifications, the oldest over the lowered center limits"), "\(reload)")
        // Per app 3 (Chat's c0, c1 go), then 4 in all (Chat's c2, c3 go): the oldest first.
        #expect(try await center() == ["org.example.Chat/c4", "org.example.News/n0", "org.example.News/n1", "org.example.News/n2"])
        let told = await withTaskGroup(of: [String]?.self) { g in
            g.addTask {
                var told: [String] = []
                for await e in chatEvents where e.event == NotificationEventName.removed {
                    if case let .array(ids)? = e.data["identifiers"] { told += ids.compactMap(\.stringValue) }
                    if told.count >= 4 { return told }
                }
                return told
            }
            g.addTask { try? await Task.sleep(nanoseconds: 5_000_000_000); return nil }
            let first = await g.next() ?? nil
            g.cancelAll()
            return first ?? []
        }
        #expect(told == ["c0", "c1", "c2", "c3"], "the app is told which of its notifications left (N11)")
        chat.close()
        news.close()

        daemon?.stop()
        try limits(perApp: 3, total: 2)
        daemon = try DaemonProcess(socket: w.socket, work: w.path, environment: w.environment)
        #expect(try await center() == ["org.example.News/n1", "org.example.News/n2"], "lowered while stopped: applied at start")
        let log = (try? String(contentsOfFile: w.path + "/log", encoding: .utf8)) ?? ""
        #expect(log.contains("dropped 2 notifications of 2 apps [N11]"), "the start says what it dropped")
    }

    @Test func configNotFound_aReloadAfterTheConfigFolderWasDeletedIsRefusedAndTheRunningConfigStays() async throws {
        let w = try WorkFolder("cli-reload-gone")
        defer { w.remove() }
        let folder = w.path + "/conf"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try #"{ timeZone: "UTC", authorization: { default: "grant" } }"#.write(toFile: folder + "/interlude.json5", atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, configFolder: folder, environment: w.environment)
        defer { daemon.stop() }
        let s = w.socket
        #expect(try interlude(["--socket", s, "status"]).out.contains(folder + "/interlude.json5"))

        // Its file alone deleted (the folder kept): refused the same way, naming the file.
        try FileManager.default.removeItem(atPath: folder + "/interlude.json5")
        let fileGone = try interlude(["--socket", s, "reload"])
        #expect(fileGone.status == 1 && fileGone.err.contains(folder + "/interlude.json5: in force and gone now")
                && fileGone.err.contains("[configNotFound]"), "\(fileGone.err)")
        #expect(try interlude(["--socket", s, "status"]).out.contains(folder + "/interlude.json5"), "the running config stays")

        try FileManager.default.removeItem(atPath: folder)
        let reload = try interlude(["--socket", s, "reload"])
        #expect(reload.status == 1, "\(reload)")
        #expect(reload.err.contains("running config stays") && reload.err.contains(folder + ": no such folder (given with --config) [configNotFound]"),
                "\(reload.err)")
        #expect(try interlude(["--socket", s, "status"]).out.contains(folder + "/interlude.json5"), "the running config stays")
        daemon.process.signal(SIGHUP)
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(daemon.isRunning)
        let log = (try? String(contentsOfFile: w.path + "/log", encoding: .utf8)) ?? ""
        #expect(log.components(separatedBy: "[configNotFound]").count - 1 == 3, "the file gone, then interlude reload and SIGHUP: \(log)")

        // At start, the same code: exit 78 (EX_CONFIG).
        let second = try DaemonProcess(socket: w.path + "/socket2", work: w.path, configFolder: folder, environment: w.environment,
                                       log: "log2", state: "state2")
        #expect(second.process.wait(timeout: 10) == .exited(78))
        let log2 = (try? String(contentsOfFile: w.path + "/log2", encoding: .utf8)) ?? ""
        #expect(log2.contains(folder + ": no such folder (given with --config) [configNotFound]"), "\(log2)")
    }

    /// The `remote` section is read at start only, but a reload that takes one the next start
    /// would refuse (exit 78) is refused now, with file, line and key (a stranger's find: reload
    /// said "not in force until the daemon restarts", and the restart left no daemon). A topic
    /// prefix with an MQTT wildcard is one (the daemon started and received nothing), with or
    /// without a broker.
    @Test func configBadValue_aRemoteSectionTheNextStartWouldRefuseIsRefusedOnReload() async throws {
        let w = try WorkFolder("cli-reload-remote")
        defer { w.remove() }
        try w.config(#"{ timeZone: "UTC" }"#)
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, environment: w.environment)
        defer { daemon.stop() }
        for (section, key) in [(#"{ broker: "http://x", deviceId: "d1" }"#, "remote.broker"),
                               (#"{ broker: "mqtt://127.0.0.1:1" }"#, "remote.deviceId"),
                               (#"{ broker: "mqtt://127.0.0.1:1", deviceId: "d1", topicPrefix: "a/#/b" }"#, "remote.topicPrefix"),
                               // No broker yet: the prefix is checked all the same (it was taken, and failed only once a broker was added).
                               (#"{ topicPrefix: "fleet/+" }"#, "remote.topicPrefix"),
                               (#"{ broker: "mqtt://127.0.0.1:1", deviceId: "d1", topicPrefix: "a\tb" }"#, "remote.topicPrefix"),
                               (#"{ broker: "mqtt://127.0.0.1:1", deviceId: "d1", topicPrefix: "$SYS/x" }"#, "remote.topicPrefix"),
                               (#"{ broker: "mqtt://127.0.0.1:1", deviceId: "d1", passwordFile: "/nonexistent/pw" }"#, "remote.passwordFile")] {
            try w.config("{ timeZone: \"UTC\",\n  remote: \(section) }")
            let r = try interlude(["--socket", w.socket, "reload"])
            #expect(r.status == 1 && r.err.contains("\(w.path)/interlude.json5:2: key '\(key)'") && r.err.contains("the next start would refuse it"),
                    "\(section): \(r.status) \(r.out) \(r.err)")
        }
        #expect(daemon.isRunning)
        // At start, the same refusal: exit 78, file and line.
        let second = try DaemonProcess(socket: w.path + "/socket2", work: w.path, environment: w.environment, log: "log2", state: "state2")
        #expect(second.process.wait(timeout: 10) == .exited(78))
        let said = LogFile.waitFor("key 'remote.passwordFile'", in: w.path + "/log2")
        #expect(said.contains("\(w.path)/interlude.json5:2: key 'remote.passwordFile'"), "\(said)")
    }

    /// A CA file that is a folder or empty is refused at start (exit 78, file and line), as a
    /// missing one is (a stranger's find: it was taken, and each TLS handshake failed).
    @Test(arguments: ["folder", "empty"])
    func configBadValue_aCAFileThatIsAFolderOrEmptyIsRefused(_ kind: String) async throws {
        let w = try WorkFolder("cli-cafile-\(kind)")
        defer { w.remove() }
        let ca = w.path + "/ca"
        if kind == "folder" { try FileManager.default.createDirectory(atPath: ca, withIntermediateDirectories: true) }
        else { _ = FileManager.default.createFile(atPath: ca, contents: Data()) }
        try w.config("{ timeZone: \"UTC\",\n  remote: { broker: \"mqtts://127.0.0.1:1\", deviceId: \"d1\", caFile: \"\(ca)\" } }")
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, environment: w.environment)
        #expect(daemon.process.wait(timeout: 10) == .exited(78))
        let said = LogFile.waitFor("key 'remote.caFile'", in: w.path + "/log")
        #expect(said.contains("\(w.path)/interlude.json5:2: key 'remote.caFile'") && said.contains(kind == "folder" ? "is not a file" : "is empty"), "\(said)")
    }

    /// A file a reload added to the `--config` folder and then deleted: the next reload is refused
    /// as for a file read at start (the guard checked only the files read at start, so that reload
    /// went silently back to the defaults). The files in force are those of the last reload taken.
    @Test func configNotFound_aFileAddedByAReloadAndDeletedIsRefusedOnTheNextReload() async throws {
        let w = try WorkFolder("cli-reload-added")
        defer { w.remove() }
        let folder = w.path + "/conf"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, configFolder: folder, environment: w.environment)
        defer { daemon.stop() }
        let s = w.socket
        #expect(!(try interlude(["--socket", s, "status"]).out.contains(folder + "/interlude.json5")), "no file yet")

        try #"{ timeZone: "UTC", authorization: { default: "grant" } }"#.write(toFile: folder + "/interlude.json5", atomically: true, encoding: .utf8)
        let added = try interlude(["--socket", s, "reload"])
        #expect(added.status == 0, "\(added.err)")
        #expect(try interlude(["--socket", s, "status"]).out.contains(folder + "/interlude.json5"), "the reload took the new file")

        try FileManager.default.removeItem(atPath: folder + "/interlude.json5")
        let gone = try interlude(["--socket", s, "reload"])
        #expect(gone.status == 1 && gone.err.contains(folder + "/interlude.json5: in force and gone now")
                && gone.err.contains("[configNotFound]"), "\(gone.status): \(gone.err)")
        #expect(try interlude(["--socket", s, "status"]).out.contains(folder + "/interlude.json5"), "the running config stays")
        #expect(daemon.isRunning)
    }

    /// Issue 7 hole 7: a center of 20 notifications with 60 KB bodies (1.2 MB) was one listing
    /// over the daemon's output limit (`server.maxOutputBytes`, 1 MiB), and `center` failed with
    /// the connection closed. It pages through the listing now.
    @Test(.enabled(if: AudioServer.required()))
    func centerListsACenterLargerThanTheOutputLimit() async throws {
        let (w, daemon) = try grantingDaemon("cli-center")
        defer { daemon.stop(); w.remove() }
        let chat = try await InterludeClient.connect(socket: w.socket, app: "org.example.Chat")
        _ = try await chat.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]),
                                as: AuthorizationResult.self)
        let body = String(repeating: "b", count: 60_000)
        for i in 0..<20 {
            _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "big\(i)", title: "t\(i)", body: body),
                                    as: AddNotificationResult.self)
        }
        for args in [["center"], ["center", "--app", "org.example.Chat"]] {
            let r = try interlude(["--socket", w.socket] + args, timeout: 30)
            #expect(r.status == 0, "\(args): \(r.err)")
            let lines = r.out.split(separator: "\n").filter { $0.contains("org.example.Chat  big") }
            #expect(lines.count == 20, "\(args): \(lines.count) notifications listed; stderr: \(r.err)")
        }
        let json = try interlude(["--socket", w.socket, "center", "--json"], timeout: 30)
        #expect(json.status == 0, "\(json.err)")
        let list = try JSONDecoder().decode(NotificationListResult.self, from: Data(json.out.utf8))
        #expect(list.notifications.map(\.identifier) == (0..<20).map { "big\($0)" })
        let badge = try interlude(["--socket", w.socket, "badge", "org.example.Chat"])
        #expect(badge.out.contains("20 in the center"), "\(badge.out)")
    }

    /// An app id, a focus mode's name: text the CLI prints escaped everywhere (a stranger's find:
    /// `interlude badge`, the center's badge header and `focus status` printed them raw, so a
    /// right-to-left override reordered the line and a line break forged one).
    @Test func appIDsAndModeNamesArePrintedEscapedEverywhere() async throws {
        let w = try WorkFolder("cli-escaped")
        defer { w.remove() }
        try w.config(#"{ authorization: { default: "grant" }, focusModes: { "night\u202Ekrow focus: off": {} } }"#)
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, environment: w.environment)
        defer { daemon.stop() }
        let app = "org.example.\u{202E}tahC"
        let c = try await InterludeClient.connect(socket: w.socket, app: app)
        defer { c.close() }
        _ = try await c.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]),
                             as: AuthorizationResult.self)
        _ = try await c.call(NotificationMethod.add, AddNotificationParams(identifier: "m1", title: "t"), as: AddNotificationResult.self)
        let badge = try interlude(["--socket", w.socket, "badge", app, "4"])
        let center = try interlude(["--socket", w.socket, "center"])
        let focus = try interlude(["--socket", w.socket, "focus", "on", "night\u{202E}krow focus: off"])
        for r in [badge, center, focus] {
            #expect(r.status == 0, "\(r.err)")
            #expect(!r.out.unicodeScalars.contains { $0.value == 0x202E }, "raw: \(r.out)")
        }
        #expect(badge.out.contains("org.example.\\u{202E}tahC: badge 4"), "\(badge.out)")
        #expect(center.out.contains("badge  org.example.\\u{202E}tahC  4"), "\(center.out)")
        #expect(focus.out.contains("focus: night\\u{202E}krow focus: off (manual)"), "\(focus.out)")
        // (A mode name with a line break, which forged a line here, is refused by the config since
        // 2026-12-04: ConfigLoaderTests.N7_aFocusModeNameMustBeAName.)

        // And every other command that names an app, and what `focus off` says was missed, and
        // the daemon's errors that quote an identifier (the same stranger's second look).
        _ = try await c.call(NotificationMethod.add, AddNotificationParams(identifier: "m2", title: "during focus"), as: AddNotificationResult.self)
        let others = [try interlude(["--socket", w.socket, "settings", app]),
                      try interlude(["--socket", w.socket, "auth", app, "grant"]),
                      try interlude(["--socket", w.socket, "register-remote", "--app", app]),
                      try interlude(["--socket", w.socket, "focus", "off"])]
        for r in others {
            #expect(r.status == 0, "\(r.err)")
            #expect(!r.out.unicodeScalars.contains { $0.value == 0x202E } && !r.err.unicodeScalars.contains { $0.value == 0x202E }, "raw: \(r.out) \(r.err)")
        }
        #expect(others[3].out.contains("missed during night\\u{202E}krow focus: off: 1 notification (org.example.\\u{202E}tahC: 1)"), "\(others[3].out)")
        // notify's warning for an app denied (or not yet authorized) names the app escaped too.
        let unasked = try interlude(["--socket", w.socket, "auth", "org.example.\u{202E}wen", "deny"])
        let warned = try interlude(["--socket", w.socket, "notify", "--app", "org.example.\u{202E}wen", "--title", "t"])
        #expect(unasked.status == 0 && warned.err.contains("org.example.\\u{202E}wen is") && !warned.err.unicodeScalars.contains { $0.value == 0x202E },
                "\(unasked.err) \(warned.err)")
        let missing = try interlude(["--socket", w.socket, "center", "respond", "nope\u{202E}\nforged", "act"])
        #expect(missing.status == 1 && missing.err.split(separator: "\n").count == 1 && !missing.err.unicodeScalars.contains { $0.value == 0x202E },
                "\(missing.err)")
    }

    /// A reference app whose daemon dies says so and exits 1 (it used to wait for ever, then
    /// report a clean deactivation that reached no daemon).
    @Test(.enabled(if: AudioServer.required()))
    func aSessionWhoseDaemonDiesExitsOne() async throws {
        let w = try WorkFolder("cli-gone")
        defer { w.remove() }
        let socket = w.socket
        let daemon = try DaemonProcess(socket: socket, work: w.path, config: false)
        guard let path = ScenarioRunner.siblingExecutable("interlude") else { throw CocoaError(.fileNoSuchFile) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = ["--socket", socket, "session", "--app", "org.example.Music", "--category", "playback", "--tone", "440"]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let errText = ReadAll(err.fileHandleForReading)
        var active = false
        for _ in 0..<100 {
            guard !active else { break }
            try await Task.sleep(nanoseconds: 50_000_000)
            let s = try? InterludeClient.request(socket: socket, app: "org.interlude.CLI", WireMethod.status, StatusParams(), as: StatusResult.self)
            active = s?.sessions.contains { $0.app == "org.example.Music" && $0.state == .active } == true
        }
        #expect(active)
        daemon.kill9()
        let deadline = Date().addingTimeInterval(10)
        while p.isRunning && Date() < deadline { try await Task.sleep(nanoseconds: 20_000_000) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        #expect(p.terminationStatus == 1)
        #expect(errText.text().contains("the daemon closed the connection"))
    }
}
