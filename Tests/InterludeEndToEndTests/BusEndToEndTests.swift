import Foundation
import Testing
import InterludeClient
import InterludePulse
import InterludeScenario
import InterludeTestSupport
import InterludeWire
import InterludePolicy

/// Desktop notifications over D-Bus end to end: the real `interluded` on a private bus and the
/// private PulseAudio, the real `notify-send`, and the sounds checked in the recording of the null
/// sink's monitor (a peak above −40 dBFS within 1.2 s is a sound, as in scenario files).
@Suite(.serialized) struct BusEndToEndTests {
    static func required() -> Bool {
        guard AudioServer.required() else { return false }
        let tools = PrivateBus.available && FileManager.default.isExecutableFile(atPath: "/usr/bin/notify-send")
        if !tools, ProcessInfo.processInfo.environment["CI"] == "true" {
            Issue.record("dbus-daemon or notify-send missing: the D-Bus end-to-end tests may not skip under CI")
        }
        return tools
    }

    /// The loudest sample in `[from, from + len]` (monotonic seconds) of a recording.
    static func peak(_ recorder: PulseRecorder, _ s: [Float], _ from: Double, _ len: Double) -> Float {
        let a = max(0, Int((from - recorder.startTime) * 48000)), b = min(s.count, a + Int(len * 48000))
        return a < b ? s[a..<b].map { abs($0) }.max() ?? 0 : 0
    }
    static let audible: Float = 0.01  // −40 dBFS

    @Test(.enabled(if: required()))
    func serverMode_soundByNameIsHeard_suppressedAndFocusAreSilent_N7() async throws {
        let bus = try PrivateBus("e2e-server")
        defer { bus.stop() }
        let work = try WorkFolder("bus-server")
        defer { work.remove() }
        let daemon = try DaemonProcess(socket: work.socket, work: work.path, config: false, environment: bus.environment, bus: true)
        defer { daemon.stop() }
        // The daemon joins the bus after its socket: wait for the name.
        for _ in 0..<100 {
            if (try? await bus.exec("/usr/bin/gdbus", ["call", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
                                                "-m", "org.freedesktop.Notifications.GetServerInformation"]))?.status == 0 { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let status = try InterludeClient.request(socket: work.socket, app: "org.interlude.CLI", WireMethod.status, StatusParams(), as: StatusResult.self)
        #expect(status.bus?.mode == "server", "\(String(describing: status.bus))")

        let pulse = PulseConnection(clientName: "interlude e2e bus")
        try pulse.connect()
        defer { pulse.disconnect() }
        let recorder = try PulseRecorder(connection: pulse, source: try pulse.defaultSinkName() + ".monitor")
        try await Task.sleep(nanoseconds: 300_000_000)

        // Each step from another app: N11's per-app cooldown does not come into it.
        let t0 = PulseClock.monotonicSeconds()
        let a = try await bus.exec("/usr/bin/notify-send", ["-p", "-a", "org.example.One", "-h", "string:sound-name:message-new-instant", "Hi"])
        #expect(a.status == 0 && UInt32(a.stdout.trimmingCharacters(in: .whitespacesAndNewlines)).map { $0 > 0 } == true, "\(a)")
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let t1 = PulseClock.monotonicSeconds()
        _ = try await bus.exec("/usr/bin/notify-send", ["-a", "org.example.Two", "-h", "string:sound-name:message-new-instant", "-h", "boolean:suppress-sound:true", "Hush"])
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let cli = try await InterludeClient.connect(socket: work.socket, app: "org.interlude.CLI")
        _ = try await cli.call(NotificationMethod.focusSet, FocusSetParams(name: "doNotDisturb"), as: FocusStatusResult.self)
        let t2 = PulseClock.monotonicSeconds()
        let c = try await bus.exec("/usr/bin/notify-send", ["-p", "-a", "org.example.Three", "-h", "string:sound-name:message-new-instant", "Focus"])
        let focusID = c.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try await Task.sleep(nanoseconds: 1_500_000_000)
        recorder.stop()
        let s = recorder.samples()
        let p0 = BusEndToEndTests.peak(recorder, s, t0, 1.2), p1 = BusEndToEndTests.peak(recorder, s, t1, 1.2)
        let p2 = BusEndToEndTests.peak(recorder, s, t2, 1.2)
        #expect(p0 > BusEndToEndTests.audible, "the theme's message-new-instant is heard: peak \(p0)")
        #expect(p1 < BusEndToEndTests.audible, "suppress-sound: nothing is heard: peak \(p1)")
        #expect(p2 < BusEndToEndTests.audible, "doNotDisturb: nothing is heard (N7): peak \(p2)")
        let center = try await cli.wholeCenter(all: true)
        #expect(center.notifications.contains { $0.app == "org.example.Three" && $0.identifier == "dbus-\(focusID)" })
        let why = try await cli.call(NotificationMethod.explain, ExplainParams(app: "org.example.Three", identifier: "dbus-\(focusID)"), as: ExplainResult.self)
        #expect(why.decision.rules.contains("N7"), "\(why.decision)")
    }

    static var dunstPresent: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/dunst") && FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb")
    }

    @Test(.enabled(if: required() && dunstPresent))
    func companionMode_dunstShowsItAndGivesTheId_InterludePlaysTheSound() async throws {
        let bus = try PrivateBus("e2e-companion")
        defer { bus.stop() }
        let display = ":\(90 + getpid() % 100)"
        let xvfb = try bus.start("/usr/bin/Xvfb", [display, "-nolisten", "tcp"])
        defer { _ = xvfb.stop() }
        try await Task.sleep(nanoseconds: 700_000_000)
        var env = bus.environment
        env["DISPLAY"] = display
        let dunst = try PrivateBus.Background("/usr/bin/dunst", [], environment: env)
        defer { _ = dunst.stop() }
        var owner = ""
        for _ in 0..<100 {
            let r = try await bus.exec("/usr/bin/gdbus", ["call", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
                                                   "-m", "org.freedesktop.Notifications.GetServerInformation"])
            if r.status == 0 { owner = r.stdout; break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        #expect(owner.contains("dunst"), "dunst owns the name: \(owner)")

        let work = try WorkFolder("bus-companion")
        defer { work.remove() }
        let daemon = try DaemonProcess(socket: work.socket, work: work.path, config: false, environment: bus.environment, bus: true)
        var status: StatusResult?
        for _ in 0..<50 {
            status = try? InterludeClient.request(socket: work.socket, app: "org.interlude.CLI", WireMethod.status, StatusParams(), as: StatusResult.self)
            if status?.bus != nil { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        #expect(status?.bus?.mode == "companion", "\(String(describing: status?.bus))")

        let pulse = PulseConnection(clientName: "interlude e2e companion")
        try pulse.connect()
        defer { pulse.disconnect() }
        let recorder = try PulseRecorder(connection: pulse, source: try pulse.defaultSinkName() + ".monitor")
        try await Task.sleep(nanoseconds: 300_000_000)
        let t0 = PulseClock.monotonicSeconds()
        let a = try await bus.exec("/usr/bin/notify-send", ["-p", "-a", "org.example.Comp", "-h", "string:sound-name:message-new-instant", "Hi dunst"])
        let id = a.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(a.status == 0 && UInt32(id) != nil, "\(a)")
        try await Task.sleep(nanoseconds: 1_500_000_000)
        recorder.stop()
        let s = recorder.samples()
        let p0 = BusEndToEndTests.peak(recorder, s, t0, 1.2)
        #expect(p0 > BusEndToEndTests.audible, "Interlude plays the sound dunst does not: peak \(p0)")
        let cli = try await InterludeClient.connect(socket: work.socket, app: "org.interlude.CLI")
        let center = try await cli.wholeCenter(all: true)
        #expect(center.notifications.contains { $0.app == "org.example.Comp" && $0.identifier == "dbus-\(id)" },
                "the center has it under dunst's id: \(center.notifications.map(\.identifier))")
        // Stopping Interlude changes nothing for the display daemon.
        daemon.stop()
        let b = try await bus.exec("/usr/bin/notify-send", ["-p", "-a", "org.example.Comp", "after"])
        #expect(b.status == 0 && UInt32(b.stdout.trimmingCharacters(in: .whitespacesAndNewlines)).map { $0 > UInt32(id)! } == true, "\(b)")
    }
}

/// S2: a `.disabled` file means silent on purpose: nothing plays (it used to play the default
/// sound after the warning), through `sound.play` and through a notification from the bus.
@Suite(.serialized) struct DisabledSoundEndToEndTests {
    @Test(.enabled(if: BusEndToEndTests.required()))
    func S2_aDisabledSoundIsSilent() async throws {
        let bus = try PrivateBus("e2e-disabled")
        defer { bus.stop() }
        let w = try WorkFolder("disabled")
        defer { w.remove() }
        _ = FileManager.default.createFile(atPath: w.sounds + "/hush.disabled", contents: Data())
        var env = w.environment
        env["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, config: false, environment: env, bus: true)
        defer { daemon.stop() }
        for _ in 0..<100 {
            if (try? await bus.exec("/usr/bin/gdbus", ["call", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
                                                      "-m", "org.freedesktop.Notifications.GetServerInformation"]))?.status == 0 { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let pulse = PulseConnection(clientName: "interlude e2e disabled")
        try pulse.connect()
        defer { pulse.disconnect() }
        let recorder = try PulseRecorder(connection: pulse, source: try pulse.defaultSinkName() + ".monitor")
        try await Task.sleep(nanoseconds: 300_000_000)
        let client = try await InterludeClient.connect(socket: w.socket, app: "org.interlude.CLI")
        let t0 = PulseClock.monotonicSeconds()
        let r = try await client.play("hush")
        #expect(r.played == "none", "\(r)")
        #expect(r.warning?.message.contains("disabled") == true, "\(String(describing: r.warning))")
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let t1 = PulseClock.monotonicSeconds()
        let n = try await bus.exec("/usr/bin/notify-send", ["-a", "org.example.Hush", "-h", "string:sound-name:hush", "quiet"])
        #expect(n.status == 0)
        try await Task.sleep(nanoseconds: 1_500_000_000)
        recorder.stop()
        let s = recorder.samples()
        let p0 = BusEndToEndTests.peak(recorder, s, t0, 1.2), p1 = BusEndToEndTests.peak(recorder, s, t1, 1.2)
        #expect(p0 < BusEndToEndTests.audible, "play of a disabled sound: silent, peak \(p0)")
        #expect(p1 < BusEndToEndTests.audible, "a bus notification naming a disabled sound: silent, peak \(p1)")
    }
}

/// N11 with bus clients: 100 `notify-send` at once from one app give one full-volume sound (the
/// others fall in the cooldown and the audible interval), and all 100 are in the center.
@Suite(.serialized) struct BusBurstEndToEndTests {
    @Test(.enabled(if: BusEndToEndTests.required()))
    func N11_aBurstOf100NotifySendIsOneSoundAndAllInTheCenter() async throws {
        let bus = try PrivateBus("e2e-burst")
        defer { bus.stop() }
        let w = try WorkFolder("burst")
        defer { w.remove() }
        try w.config("{ bursts: { maxDeliveredPerApp: 200 } }")  // the default keeps 50 per app (N11)
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, config: true, environment: bus.environment, bus: true)
        defer { daemon.stop() }
        for _ in 0..<100 {
            if (try? await bus.exec("/usr/bin/gdbus", ["call", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
                                                      "-m", "org.freedesktop.Notifications.GetServerInformation"]))?.status == 0 { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let pulse = PulseConnection(clientName: "interlude e2e burst")
        try pulse.connect()
        defer { pulse.disconnect() }
        let recorder = try PulseRecorder(connection: pulse, source: try pulse.defaultSinkName() + ".monitor")
        try await Task.sleep(nanoseconds: 300_000_000)
        // One sound alone first (another app), as the measure of "one sound".
        let tRef = PulseClock.monotonicSeconds()
        _ = try await bus.exec("/usr/bin/notify-send", ["-a", "org.example.Reference", "-h", "string:sound-name:message-new-instant", "one"])
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let t0 = PulseClock.monotonicSeconds()
        let senders = try (0..<100).map { i in
            try bus.start("/usr/bin/notify-send", ["-p", "-a", "org.example.Burst", "-h", "string:sound-name:message-new-instant", "burst \(i)"])
        }
        var ok = 0
        for s in senders where await s.ended(timeout: 30).status == 0 { ok += 1 }
        #expect(ok == 100, "every notify-send got its id")
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let t1 = PulseClock.monotonicSeconds()
        recorder.stop()
        let s = recorder.samples()
        func energy(_ from: Double, _ to: Double) -> Double {
            let a = max(0, Int((from - recorder.startTime) * 48000)), b = min(s.count, Int((to - recorder.startTime) * 48000))
            return a < b ? s[a..<b].reduce(0) { $0 + Double($1) * Double($1) } : 0
        }
        let one = energy(tRef, tRef + 2), burst = energy(t0, t1)
        #expect(one > 0, "the reference sound is heard")
        #expect(burst > 0.6 * one && burst < 1.6 * one, "the burst sounds like one sound: energy \(burst) against \(one) for one")
        let cli = try await InterludeClient.connect(socket: w.socket, app: "org.interlude.CLI")
        let center = try await cli.wholeCenter(app: "org.example.Burst")
        #expect(center.notifications.count == 100, "all 100 in the center: \(center.notifications.count)")
    }
}
