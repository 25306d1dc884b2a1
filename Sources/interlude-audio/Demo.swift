import Foundation
import InterludeClient
import InterludeCommandLine
import InterludePolicy
import InterludePulse
import InterludeScenario
import InterludeWire

/// `interlude demo`: the main job in one go, on the running daemon. Music plays; a navigation
/// prompt ducks it (A2); a podcast is paused by a prompt and resumes (A3, A5); a call pauses it and
/// it resumes (A4, A5); a notification sound plays (S3) and ducks the podcast for its length (S4).
/// Prints the daemon's timeline with the levels it set, then the levels measured at the output.
enum Demo {
    struct Check { var at: Double; var who: String; var hz: Double; var expect: String; var range: ClosedRange<Double> }

    static func run(socket: String?, _ argv: [String]) async throws -> Int32 {
        _ = try Arguments(argv, flags: [], options: [])  // no flags or options: refuses any
        let pulse = PulseConnection(clientName: "interlude demo")
        try AudioCLI.connectAudio(pulse)
        defer { pulse.disconnect() }
        let watcher = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")  // the user's tool
        try await watcher.subscribe()
        let start = Date().timeIntervalSince1970
        let names = SessionNames()
        let recorder = try? PulseRecorder(connection: pulse, source: (try pulse.defaultSinkName()) + ".monitor")
        let monoStart = PulseClock.monotonicSeconds()

        print("Interlude demo on daemon \(watcher.greeting.version). Timeline (seconds from start):")
        let printer = Task {
            for await e in watcher.events {
                let t = String(format: "%6.2f", e.time - start)
                let sid = e.data["session"]?.stringValue ?? ""
                let who = names[sid] ?? sid
                print("  \(t)  \(describe(e, who: who))")
            }
        }
        /// A line of the timeline; a message's further lines (a decision's notes) under its text.
        func say(_ s: String) {
            let lines = s.split(separator: "\n", omittingEmptySubsequences: false)
            print("  " + String(format: "%6.2f", Date().timeIntervalSince1970 - start) + "  ▶ " + lines[0]
                  + lines.dropFirst().map { "\n            " + $0.drop { $0 == " " } }.joined())
        }
        func app(_ name: String, _ id: String, _ cat: AudioCategory, _ mode: AudioMode, _ opts: [AudioSessionOption], _ hz: Double) -> ReferenceApp {
            ReferenceApp(socket: socket, app: id, category: cat, mode: mode, options: opts,
                         source: .sine(frequency: hz, amplitude: 0.25), pulse: pulse)
        }
        func begin(_ r: ReferenceApp, _ label: String) async throws {
            try await r.register()
            names[r.session!.rawValue] = label
            try await r.activate()
        }
        func sleep(until t: Double) async {
            let d = t - (Date().timeIntervalSince1970 - start)
            if d > 0 { try? await Task.sleep(nanoseconds: UInt64(d * 1e9)) }
        }
        let promptOptions: [AudioSessionOption] = [.duckOthers, .interruptSpokenAudioAndMixWithOthers]

        say("music (440 Hz) starts playing")
        let music = app("music", "org.example.Music", .playback, .default, [], 440)
        try await begin(music, "music")
        await sleep(until: 2)
        say("navigation prompt (1320 Hz) for 1.5 s: music should duck to -14 dB")
        let nav1 = app("nav", "org.example.Maps", .playback, .voicePrompt, promptOptions, 1320)
        try await begin(nav1, "nav")
        await sleep(until: 3.5)
        await nav1.stop()
        await sleep(until: 4.5)
        say("music stops; a podcast (550 Hz, spokenAudio) starts")
        await music.stop()
        let podcast = app("podcast", "org.example.Podcasts", .playback, .spokenAudio, [], 550)
        try await begin(podcast, "podcast")
        await sleep(until: 6)
        say("navigation prompt for 1.5 s: the podcast should pause, then resume")
        let nav2 = app("nav", "org.example.Maps", .playback, .voicePrompt, promptOptions, 1320)
        try await begin(nav2, "nav")
        await sleep(until: 7.5)
        await nav2.stop()
        await sleep(until: 9)
        say("a call (990 Hz) for 2.5 s: the podcast should pause, then resume")
        let call = app("call", "org.example.Phone", .playAndRecord, .voiceChat, [], 990)
        try await begin(call, "call")
        await sleep(until: 11.5)
        await call.stop()
        await sleep(until: 12.5)
        say("a notification sound plays (default)")
        let r = try await watcher.play("default")
        if let w = r.warning { say("warning: \(w.message)") }
        await sleep(until: 14.5)
        await podcast.stop()

        // Notifications (N-rules): the user turns on the sleep focus; an ordinary message is
        // delivered silently (N7); an alarm's critical alert plays through it if the alarm app is
        // entitled in the config (N3; Scripts/demo entitles org.example.Alarm).
        await sleep(until: 15)
        say("focus sleep on; a chat message and an alarm's critical alert arrive")
        let focusBefore = try await watcher.call(NotificationMethod.focusStatus, StatusParams(), as: FocusStatusResult.self)
        _ = try await watcher.call(NotificationMethod.focusSet, FocusSetParams(name: "sleep"), as: FocusStatusResult.self)
        func deliver(_ app: String, _ title: String, level: InterruptionLevel, volume: Double?) async throws -> (Double, NotificationDecision) {
            var auth = SettingsParams(app: app)
            auth.authorization = .authorized
            _ = try await watcher.call(NotificationMethod.setSettings, auth, as: NotificationAppSettings.self)
            let c = try await InterludeClient.connect(socket: socket, app: app)
            _ = try await c.call(NotificationMethod.requestAuthorization,
                                 RequestAuthorizationParams(options: [.alert, .sound, .criticalAlert]), as: AuthorizationResult.self)
            let t = Date().timeIntervalSince1970 - start
            let r = try await c.call(NotificationMethod.add, AddNotificationParams(title: title, sound: "default", criticalVolume: volume,
                                                                                     level: level), as: AddNotificationResult.self)
            say("\(app)'s reply: \(CommandOutput.describe(r.decision))")
            c.close()
            return (t, r.decision)
        }
        let (chatAt, chat) = try await deliver("org.example.Chat", "See you at 8", level: .active, volume: nil)
        await sleep(until: 16.5)
        let (alarmAt, alarm) = try await deliver("org.example.Alarm", "Wake up", level: .critical, volume: 0.8)
        await sleep(until: 18.5)
        // The focus as it was: a manual one back on (until its end), else off (schedules resume).
        let restore = focusBefore.manual ? FocusSetParams(name: focusBefore.focus, until: focusBefore.until) : FocusSetParams(name: nil)
        _ = try? await watcher.call(NotificationMethod.focusSet, restore, as: FocusStatusResult.self)
        await sleep(until: 19)

        // Desktop notifications over D-Bus (README "D-Bus notifications"), when the daemon is on a
        // bus: notify-send, as any desktop app sends them. A sound by name, one suppressed, one
        // under the sleep focus, a critical one from the entitled alarm app through it.
        var busChecks: [(who: String, at: Double, decision: NotificationDecision?)] = []
        let status = try? await watcher.call(WireMethod.status, StatusParams(), as: StatusResult.self)
        let notifySend = "/usr/bin/notify-send"
        if let bus = status?.bus, bus.mode != "off", FileManager.default.isExecutableFile(atPath: notifySend) {
            say("desktop notifications over D-Bus (\(bus.mode) mode): notify-send, as any app sends them")
            func send(_ who: String, _ args: [String]) async -> (String, Double, NotificationDecision?) {
                let t = Date().timeIntervalSince1970 - start
                let p = Process()
                p.executableURL = URL(fileURLWithPath: notifySend)
                p.arguments = ["-p"] + args
                let out = Pipe()
                p.standardOutput = out
                var id = ""
                if (try? p.run()) != nil {
                    id = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                        .trimmingCharacters(in: .whitespacesAndNewlines)
                    p.waitUntilExit()
                }
                let app = args[args.firstIndex(of: "-a")! + 1]
                let d = try? await watcher.call(NotificationMethod.explain, ExplainParams(app: app, identifier: "dbus-\(id)"),
                                                as: ExplainResult.self).decision
                say("notify-send \(args.joined(separator: " ")) → id \(id.isEmpty ? "none" : id)" + (d.map { ": " + CommandOutput.describe($0) } ?? ""))
                return (who, t, d)
            }
            busChecks.append(await send("mail", ["-a", "org.example.Mail", "-h", "string:sound-name:message-new-instant", "New mail"]))
            await sleep(until: 20.5)
            busChecks.append(await send("muted", ["-a", "org.example.Mail2", "-h", "string:sound-name:message-new-instant",
                                                  "-h", "boolean:suppress-sound:true", "Quiet mail"]))
            await sleep(until: 22)
            say("focus sleep on")
            _ = try? await watcher.call(NotificationMethod.focusSet, FocusSetParams(name: "sleep"), as: FocusStatusResult.self)
            busChecks.append(await send("im", ["-a", "org.example.Chat", "-h", "string:sound-name:message-new-instant", "Are you up?"]))
            await sleep(until: 23.5)
            busChecks.append(await send("critical", ["-a", "org.example.Alarm", "-u", "critical", "-h", "string:sound-name:alarm-clock-elapsed",
                                                     "Wake up"]))
            await sleep(until: 25.5)
            _ = try? await watcher.call(NotificationMethod.focusSet, restore, as: FocusStatusResult.self)
            await sleep(until: 26)
        } else {
            say("no session bus (or no notify-send): the D-Bus part is skipped")
        }
        printer.cancel()
        watcher.close()

        guard let recorder else { print("(no recording of the output: the monitor source could not be opened)"); return 0 }
        recorder.stop()
        let samples = recorder.samples()
        let offset = recorder.startTime - monoStart  // recording start relative to the demo's start
        let checks = [
            Check(at: 1.5, who: "music", hz: 440, expect: "0 dB", range: -1...1),
            Check(at: 3.0, who: "music", hz: 440, expect: "ducked -14 dB", range: -16...(-12)),
            Check(at: 4.3, who: "music", hz: 440, expect: "back to 0 dB", range: -1...1),
            Check(at: 5.5, who: "podcast", hz: 550, expect: "0 dB", range: -1...1),
            Check(at: 7.0, who: "podcast", hz: 550, expect: "paused (silent)", range: -200...(-50)),
            Check(at: 8.5, who: "podcast", hz: 550, expect: "resumed 0 dB", range: -1...1),
            Check(at: 10.5, who: "podcast", hz: 550, expect: "paused for the call (silent)", range: -200...(-50)),
            Check(at: 10.5, who: "call", hz: 990, expect: "0 dB", range: -1...1),
            Check(at: 12.2, who: "podcast", hz: 550, expect: "resumed 0 dB", range: -1...1),
        ]
        print("\nMeasured at the output (recording of the sink's monitor, level of each tone):")
        var failures = 0
        for c in checks {
            let level = ToneAnalysis.level(samples: samples, sampleRate: 48000, frequency: c.hz, at: c.at - offset)
            let ok = c.range.contains(level)
            if !ok { failures += 1 }
            print(String(format: "  %5.1f s  %-8@ %6.1f dB   expected %@  %@", c.at, c.who as NSString, max(level, -99),
                         c.expect as NSString, ok ? "ok" : "MISMATCH"))
        }
        // The notification sounds: silence while the chat message is decided silent, the chime while
        // the alarm plays (when the decision says it plays).
        func peakDb(_ from: Double, _ to: Double) -> Double {
            let a = max(0, Int((from - offset) * 48000)), b = min(samples.count, Int((to - offset) * 48000))
            let p = a < b ? samples[a..<b].reduce(Float(0)) { max($0, abs($1)) } : 0
            return p > 0 ? 20 * log10(Double(p)) : -120
        }
        for (who, at, d) in [("chat", chatAt, chat), ("alarm", alarmAt, alarm)] {
            let peak = peakDb(at, at + 1.2)
            let expectSound = d.sound != nil
            let ok = expectSound ? peak > -30 : peak < -60
            if !ok { failures += 1 }
            print(String(format: "  %5.1f s  %-8@ peak %6.1f dBFS expected %@  %@", at, who as NSString, max(peak, -99),
                         (expectSound ? "its sound" : "silence") as NSString, ok ? "ok" : "MISMATCH"))
        }
        for (who, at, d) in busChecks {
            let peak = peakDb(at, at + 1.2)
            let expectSound = d?.sound.map { $0.volume > 0 } ?? false
            let ok = expectSound ? peak > -40 : peak < -60
            if !ok { failures += 1 }
            print(String(format: "  %5.1f s  %-8@ peak %6.1f dBFS expected %@  %@  (notify-send)", at, who as NSString, max(peak, -99),
                         (expectSound ? "its sound" : "silence") as NSString, ok ? "ok" : "MISMATCH"))
        }
        if alarm.level != .critical {
            print("  note: org.example.Alarm is not entitled to critical alerts in this daemon's config (entitledCriticalApps, N3),")
            print("        so its alert was delivered as active and the sleep focus silenced it; ./Scripts/demo entitles it.")
        }
        let player = await DemoPlayer.run(socket: socket, pulse: pulse)
        failures += player
        print(failures == 0 ? "\nEverything behaved as the rules say."
              : "\n\(failures) check(s) failed" + (player > 0 ? ", the media player's part among them (see FAILED or MISMATCH above)." : " (see MISMATCH above)."))
        return failures == 0 ? 0 : 1
    }

    /// Session ids → the demo's names for them, shared with the event printer.
    final class SessionNames: @unchecked Sendable {
        private let lock = NSLock()
        private var names: [String: String] = [:]
        subscript(id: String) -> String? {
            get { lock.withLock { names[id] } }
            set { lock.withLock { names[id] = newValue } }
        }
    }

    static func rules(_ d: JSONValue) -> String {
        guard case let .array(r)? = d["decision"]?["rules"] else { return "" }
        return r.compactMap(\.stringValue).joined(separator: ", ")
    }

    static func describe(_ e: WireEvent, who: String) -> String {
        let d = e.data
        switch e.event {
        case WireEventName.duckChanged:
            let lv = d["levelDb"]?.doubleValue ?? 0
            return "\(who): " + (d["ducked"]?.boolValue == true ? "ducked to \(CommandOutput.fmt(lv)) dB (ramped) [A2]" : "duck released → 0 dB (ramped)")
        case WireEventName.interruptionBegan:
            return "\(who): interruptionBegan (reason \(d["reason"]?.stringValue ?? "?")) → pauses"
        case WireEventName.interruptionEnded:
            return "\(who): interruptionEnded shouldResume=\(d["shouldResume"]?.boolValue ?? false) [A5]"
        case WireEventName.enforcement:
            return "\(who): \(d["muted"]?.boolValue == true ? "muted by the daemon [A8]" : "unmuted")"
        case NotificationEventName.delivered:
            // The event says the notification reached the center; its decision says how: delivered,
            // or silenced (in the center without sound or banner, N5/N7), as the daemon's log does.
            let n = d["notification"]
            let outcome = d["decision"]?["outcome"]?["kind"]?.stringValue ?? "delivered"
            let how = outcome == "silenced" ? "silenced (in the center, no sound, no banner)" : outcome
            return "notification \(n?["app"]?.stringValue ?? "?"): \"\(n?["title"]?.stringValue ?? "")\" \(how) [\(rules(d))]"
        case NotificationEventName.focusChanged:
            return "focus: \(d["previous"]?.stringValue ?? "off") → \(d["focus"]?.stringValue ?? "off") [N7]"
        case NotificationEventName.missedDuringFocus:
            let missed = d["missed"].flatMap { if case let .array(a) = $0 { return a.count } else { return nil } } ?? 0
            return "missed during focus \(d["focus"]?.stringValue ?? ""): " + (missed == 0 ? "nothing" : "\(missed), in one summary") + " [N7]"
        case NotificationEventName.settingsChanged:
            // The user's settings or, for a D-Bus app, the config's `bus.authorization`: the event
            // says what they are now, not who set them.
            return "notifications from \(d["app"]?.stringValue ?? "?"): \(d["settings"]?["authorization"]?.stringValue ?? "?") [N1, N2]"
        case NotificationEventName.badgeChanged:
            return "badge of \(d["app"]?.stringValue ?? "?") → \(Int(d["count"]?.doubleValue ?? 0)) [N12]"
        case WireEventName.soundPlayed:
            return "sound \(d["played"]?.stringValue ?? "?") played (\(CommandOutput.fmt(d["duration"]?.doubleValue ?? 0)) s) [S3]"
        default:
            return "\(who.isEmpty ? "" : who + ": ")\(e.event) \(d)"
        }
    }
}
