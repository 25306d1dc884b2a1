import Foundation
import Testing
import InterludeClient
import InterludePulse
import InterludeScenario
import InterludeWire
import InterludePolicy
import InterludeTestSupport

/// End to end on a real PulseAudio server (started by Scripts/test): the real `interluded`, real
/// streams, and the recording of the null sink's monitor. Under CI=true a missing server fails.
enum AudioServer {
    static func available() -> Bool {
        let pulse = PulseConnection(clientName: "interlude e2e probe")
        defer { pulse.disconnect() }
        return (try? pulse.connect(timeout: 3)) != nil
    }
    /// Records a test issue under CI when there is no server; returns whether to go on.
    static func required() -> Bool {
        if available() { return true }
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            Issue.record("no PulseAudio server reachable (PULSE_SERVER=\(ProcessInfo.processInfo.environment["PULSE_SERVER"] ?? "unset")); audio tests may not skip under CI")
        }
        return false
    }
    static let scenarioFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Scenarios")
    static var scenarioFiles: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: scenarioFolder.path)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
    }
}

/// The project's own scenario files: the five shared timelines (01–05, copied into Tests/Scenarios)
/// and one per A-rule (A1, A8, A9, A10, A12), each run by the real scenario runner.
@Suite(.serialized) struct ScenarioEndToEndTests {
    @Test(.enabled(if: AudioServer.required()), arguments: AudioServer.scenarioFiles)
    func scenarioHolds(file: String) async throws {
        let path = AudioServer.scenarioFolder.appendingPathComponent(file).path
        let scenario = try Scenario.parse(try String(contentsOfFile: path, encoding: .utf8), file: file)
        let report = try await ScenarioRunner(scenario, options: .init()).run()
        #expect(!report.outcomes.isEmpty)
        for o in report.outcomes {
            #expect(o.held, "\(file) line \(o.line): \(o.text)\n\(report.daemonLog)")
        }
    }

    @Test func allSharedTimelinesAreCovered() {
        for n in ["01-nav-ducks-music", "02-nav-pauses-podcast", "03-call-pauses-then-resumes", "04-nested-prompt-then-call",
                  "05-notifications-under-focus"] {
            #expect(AudioServer.scenarioFiles.contains(n + ".json"))
        }
    }
}

@Suite struct ScenarioParsingTests {
    func error(_ text: String) -> String? {
        do { _ = try Scenario.parse(text, file: "t.json"); return nil } catch { return error.description }
    }
    @Test func malformedScenariosNameThePlace() {
        #expect(error("{ \"sessions\": {}, \"steps\": [ {\"at\": 1, \"jump\": \"x\"} ] }")?.contains("steps[0]") == true)
        #expect(error("{\n \"sessions\": {\n  \"a\": {\"app\": \"x\", \"category\": \"playback\", \"tone\": 440},\n  \"b\": {\"app\": \"y\", \"category\": \"playback\", \"tone\": 480}\n }\n}")?.contains("closer than 100 Hz") == true)
        #expect(error("{ \"sessions\": {}, \"steps\": [ {\"at\": 0, \"activate\": \"ghost\"} ] }")?.contains("no session named \"ghost\"") == true)
        #expect(error("{ \"name\": \"x\",\n \"bogus\": 1 }")?.hasPrefix("t.json:2:") == true)
        #expect(error("{ \"name\": ")?.contains("syntax") == true)
        #expect(error("{\"sessions\": {\"a\": {\"app\": \"x\", \"category\": \"loud\", \"tone\": 440}}}")?.contains("unknown category") == true)
        #expect(error("{\"name\": \"nothing to check\"}")?.contains("at least one expectation") == true)
        #expect(error("{\"sessions\": {\"a\": {\"app\": \"x\", \"category\": \"playback\", \"tone\": 440}}, \"steps\": [{\"at\": 1e7, \"activate\": \"a\"}], \"expect\": [{\"at\": 1, \"session\": \"a\", \"state\": \"active\"}]}")?.contains("at most 600 s") == true)
    }

    @Test func aBadConfigOrNotifyStepIsReportedInTheScenarioFile() {
        // The scenario's config is checked against the config schema, at its line in this file.
        let config = error("{\n \"config\": {\n  \"audio\": {\n   \"duckLevelDb\": 5\n  }\n }\n}")
        #expect(config?.hasPrefix("t.json:4: config.audio.duckLevelDb") == true, "\(config ?? "accepted")")
        let level = error("{\n \"steps\": [\n  {\"at\": 0, \"notify\": \"n1\", \"app\": \"x\", \"level\": \"loud\"}\n ],\n \"expect\": [{\"notification\": \"n1\", \"sound\": \"played\"}]\n}")
        #expect(level?.contains("steps[0].level: must be passive, active, timeSensitive or critical") == true, "\(level ?? "accepted")")
        let volume = error("{\n \"steps\": [\n  {\"at\": 0, \"notify\": \"n1\", \"app\": \"x\", \"criticalVolume\": 2}\n ],\n \"expect\": [{\"notification\": \"n1\", \"sound\": \"played\"}]\n}")
        #expect(volume?.contains("criticalVolume") == true, "\(volume ?? "accepted")")
    }
}

/// Issue-level checks of `interlude play`: the default sound is audible at the monitor; a 45 s
/// file, an empty file and a text file named .wav each play the default with a warning (S1), and
/// the daemon keeps serving.
@Suite(.serialized) struct SoundEndToEndTests {
    @Test(.enabled(if: AudioServer.required()))
    func playDefaultIsAudibleAndBadFilesFallBack_S1() async throws {
        let w = try WorkFolder("e2e")
        defer { w.remove() }
        let (work, sounds) = (w.path, w.sounds)
        try WAVFile.writeSine(path: sounds + "/long.wav", frequency: 300, amplitude: 0.25, seconds: 45, sampleRate: 48000)
        _ = FileManager.default.createFile(atPath: sounds + "/empty.wav", contents: Data())
        try "this is not audio".write(toFile: sounds + "/text.wav", atomically: true, encoding: .utf8)

        let socket = w.socket
        let daemon = try DaemonProcess(socket: socket, work: work, config: false, environment: w.environment)
        defer { daemon.stop() }

        let pulse = PulseConnection(clientName: "interlude e2e")
        try pulse.connect()
        defer { pulse.disconnect() }
        let recorder = try PulseRecorder(connection: pulse, source: try pulse.defaultSinkName() + ".monitor")
        let client = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        let t0 = PulseClock.monotonicSeconds()
        let ok = try await client.play("default")  // as the user's tool (N17 applies to apps)
        #expect(ok.warning == nil)
        #expect(ok.played == "default")
        try await Task.sleep(nanoseconds: 1_500_000_000)
        for bad in ["long.wav", "empty.wav", "text.wav"] {
            let r = try await client.play(sounds + "/" + bad)
            #expect(r.played == "default", "\(bad)")
            #expect(r.warning != nil, "\(bad) should warn")
        }
        recorder.stop()
        // The default chime is audible: the recording holds sound within 1 s of the request.
        let samples = recorder.samples()
        let from = max(0, Int((t0 - recorder.startTime) * 48000))
        let window = samples[min(from, samples.count)..<min(samples.count, from + 48000)]
        let peak = window.map { abs($0) }.max() ?? 0
        #expect(peak > 0.05, "default sound peak \(peak) at the monitor")
        #expect(try await client.status().audioConnected)
        #expect(daemon.isRunning)
    }
}

extension SoundEndToEndTests {
    /// S3: the sample cache follows the file: a sound file replaced after it was played is decoded
    /// and uploaded again (and an unusable replacement falls back to the default, S1).
    @Test(.enabled(if: AudioServer.required()))
    func S3_aReplacedSoundFileIsUploadedAgain() async throws {
        let w = try WorkFolder("e2e-s3")
        defer { w.remove() }
        let (socket, sounds) = (w.socket, w.sounds)
        let daemon = try DaemonProcess(socket: socket, work: w.path, config: false, environment: w.environment)
        defer { daemon.stop() }
        let client = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        let file = sounds + "/short.wav"
        try WAVFile.writeSine(path: file, frequency: 800, amplitude: 0.25, seconds: 0.3, sampleRate: 48000)
        let first = try await client.play("short", volume: 0.1)
        #expect(first.played == "short" && abs(first.duration - 0.3) < 0.01, "\(first)")
        try WAVFile.writeSine(path: file, frequency: 800, amplitude: 0.25, seconds: 2, sampleRate: 48000)
        let second = try await client.play("short", volume: 0.1)
        #expect(second.played == "short" && abs(second.duration - 2) < 0.01, "\(second)")
        try WAVFile.writeSine(path: file, frequency: 800, amplitude: 0.25, seconds: 45, sampleRate: 48000)
        let third = try await client.play("short", volume: 0.1)
        #expect(third.played == "default" && third.warning != nil, "\(third)")
        #expect(daemon.isRunning)
    }
}

/// N3 on a real server: an entitled critical alert plays at its volume through a muted output
/// (the output is unmuted for the sound's length, then muted again), and an ordinary one does not.
@Suite(.serialized) struct CriticalAlertEndToEndTests {
    @Test(.enabled(if: AudioServer.required()))
    func N3_criticalSoundPlaysThroughAMutedOutputWhichIsRestored() async throws {
        let work = NSTemporaryDirectory() + "interlude-n3-\(getpid())"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        try #"{ authorization: { default: "grant" }, entitledCriticalApps: ["org.example.Alarm"] }"#
            .write(toFile: work + "/interlude.json5", atomically: true, encoding: .utf8)
        let socket = work + "/socket"
        let daemon = try DaemonProcess(socket: socket, work: work)
        defer { daemon.stop() }

        let pulse = PulseConnection(clientName: "interlude e2e n3")
        try pulse.connect()
        defer { pulse.disconnect() }
        let sink = try pulse.defaultSinkName()
        try pulse.setSinkMute(sink, true)
        defer { try? pulse.setSinkMute(sink, false) }
        let recorder = try PulseRecorder(connection: pulse, source: sink + ".monitor")

        func client(_ app: String) async throws -> InterludeClient {
            let c = try await InterludeClient.connect(socket: socket, app: app)
            _ = try await c.call(NotificationMethod.requestAuthorization,
                                 RequestAuthorizationParams(options: [.alert, .sound, .criticalAlert]), as: AuthorizationResult.self)
            return c
        }
        let chat = try await client("org.example.Chat")
        let t0 = PulseClock.monotonicSeconds()
        _ = try await chat.call(NotificationMethod.add, AddNotificationParams(title: "hi", sound: "default"), as: AddNotificationResult.self)
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let alarm = try await client("org.example.Alarm")
        let t1 = PulseClock.monotonicSeconds()
        let r = try await alarm.call(NotificationMethod.add, AddNotificationParams(title: "wake", sound: "default", criticalVolume: 0.5,
                                                                                     level: .critical), as: AddNotificationResult.self)
        #expect(r.decision.rules.contains("N3"))
        try await Task.sleep(nanoseconds: 400_000_000)
        #expect(try pulse.sinkMuted(sink) == false, "the output is unmuted while the critical sound plays")
        try await Task.sleep(nanoseconds: 1_600_000_000)
        #expect(try pulse.sinkMuted(sink) == true, "and muted again after it")
        recorder.stop()
        let s = recorder.samples()
        func peak(_ from: Double, _ len: Double) -> Float {
            let a = max(0, Int((from - recorder.startTime) * 48000)), b = min(s.count, a + Int(len * 48000))
            return a < b ? s[a..<b].map { abs($0) }.max() ?? 0 : 0
        }
        #expect(peak(t0, 1.2) < 0.001, "an ordinary sound on a muted output is not heard")
        let p = peak(t1, 1.2)
        // The default chime peaks at about -3 dBFS; at volume 0.5 (-6 dB) about -9 dBFS.
        #expect(p > 0.2 && p < 0.5, "critical sound peak \(p) (expected about 0.35 at volume 0.5)")
    }
}

/// N15 with the real daemon and its SQLite state: a notification acknowledged, then the daemon
/// killed with SIGKILL before its trigger fires, is delivered exactly once after the restart,
/// marked late; settings, focus and badges survive too.
@Suite(.serialized) struct PersistenceEndToEndTests {
    @Test func N15_killNineBetweenAcknowledgementAndDeliveryDeliversOnceMarkedLate() async throws {
        let work = NSTemporaryDirectory() + "interlude-n15-\(getpid())"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: work + "/log", contents: nil)
        defer { try? FileManager.default.removeItem(atPath: work) }
        try #"{ authorization: { default: "grant" }, missedTriggerTolerance: 0.5 }"#
            .write(toFile: work + "/interlude.json5", atomically: true, encoding: .utf8)
        let socket = work + "/socket"

        var d = try DaemonProcess(socket: socket, work: work)
        let app = try await InterludeClient.connect(socket: socket, app: "org.example.Reminders")
        _ = try await app.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]),
                               as: AuthorizationResult.self)
        let r = try await app.call(NotificationMethod.add, AddNotificationParams(identifier: "r1", title: "stand up",
                                   trigger: TriggerParams(in: 1.5)), as: AddNotificationResult.self)
        #expect(r.identifier == "r1")
        let cli = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        _ = try await cli.call(NotificationMethod.focusSet, FocusSetParams(name: "work"), as: FocusStatusResult.self)
        d.kill9()  // acknowledged, not yet delivered
        try await Task.sleep(nanoseconds: 3_000_000_000)  // the trigger passes while the daemon is down

        d = try DaemonProcess(socket: socket, work: work)
        let cli2 = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        let list = try await cli2.call(NotificationMethod.delivered, ListNotificationsParams(app: "org.example.Reminders"),
                                       as: NotificationListResult.self)
        #expect(list.notifications.map(\.identifier) == ["r1"])
        #expect(list.notifications.first?.late == true)
        // Decided when it came, with the focus "work" on: silenced (N7), and the log says it came late.
        let said = LogFile.waitFor("notification org.example.Reminders/r1 silenced late", in: work + "/log")
        #expect(said.contains("notification org.example.Reminders/r1 silenced late"), "the log does not say it came late: \(said)")
        #expect(list.pending.isEmpty)
        let focus = try await cli2.call(NotificationMethod.focusStatus, StatusParams(), as: FocusStatusResult.self)
        #expect(focus.focus == "work")
        d.stop()

        // A second restart does not deliver it again.
        d = try DaemonProcess(socket: socket, work: work)
        let cli3 = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        let again = try await cli3.call(NotificationMethod.delivered, ListNotificationsParams(app: "org.example.Reminders"),
                                        as: NotificationListResult.self)
        #expect(again.notifications.count == 1)
        d.stop()
        _ = cli; _ = app
    }
}

/// One daemon per state folder (``StateFolderLock``): a second daemon on the same `--state` with
/// its own socket would overwrite the first's notifications (N15) and undo its ducks (A7); it
/// refuses to start, exits 75 and names the holder; the folder is free again after a SIGKILL.
@Suite(.serialized) struct StateFolderEndToEndTests {
    @Test func N15_aSecondDaemonOnTheSameStateFolderRefusesToStart() async throws {
        let w = try WorkFolder("e2e-state-lock")
        defer { w.remove() }
        let first = try DaemonProcess(socket: w.path + "/first", work: w.path, config: false, log: "first.log")
        defer { first.stop() }
        try #require(SocketProbe.live(w.path + "/first"))
        let second = try DaemonProcess(socket: w.path + "/second", work: w.path, config: false, log: "second.log")
        defer { second.stop() }
        for _ in 0..<100 { guard second.isRunning else { break }; try await Task.sleep(for: .milliseconds(50)) }
        try #require(!second.isRunning, "a second daemon on the same state folder keeps running")
        #expect(second.process.wait(timeout: 10) == .exited(75))
        let said = (try? String(contentsOfFile: w.path + "/second.log", encoding: .utf8)) ?? ""
        #expect(said.contains("[storeInUse]") && said.contains("pid \(first.process.pid)"), "\(said)")
        #expect(!SocketProbe.live(w.path + "/second"), "a refusing daemon must not listen")
        #expect(first.isRunning && SocketProbe.live(w.path + "/first"))

        first.kill9()
        let third = try DaemonProcess(socket: w.path + "/third", work: w.path, config: false, log: "third.log")
        defer { third.stop() }
        #expect(SocketProbe.live(w.path + "/third"), "after a SIGKILL of the holder: \((try? String(contentsOfFile: w.path + "/third.log", encoding: .utf8)) ?? "")")
    }

    /// A socket another daemon serves: exit 75 as the other conflicts (state folder, audio
    /// server), named, before the state folder or the audio server is touched; the first goes on.
    /// (It exited 1, a stranger's find.)
    @Test func aSecondDaemonOnALiveSocketExits75() throws {
        guard let path = ScenarioRunner.siblingExecutable("interluded") else { throw CocoaError(.fileNoSuchFile) }
        let w = try WorkFolder("e2e-socket-live")
        defer { w.remove() }
        let first = try DaemonProcess(socket: w.path + "/socket", work: w.path, config: false, log: "first.log")
        defer { first.stop() }
        try #require(SocketProbe.live(w.path + "/socket"))
        let r = try ChildProcess.run(path, ["--socket", w.path + "/socket", "--state", w.path + "/second-state", "--private", "--no-bus"], timeout: 20)
        #expect(r.exit == .exited(75), "\(r.stderr)")
        #expect(r.stderr.contains("another daemon is listening on \(w.path)/socket") && r.stderr.contains("[socketInUse]"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: w.path + "/second-state/interlude.lock"), "the state folder was taken first")
        #expect(first.isRunning && SocketProbe.live(w.path + "/socket"))
    }

    /// A socket path longer than an address holds is refused before anything else (exit 1, "too
    /// long"), also by a managing daemon, which joined the audio server first and could exit 75
    /// ("another manager") over a path it could never have listened on.
    @Test func aSocketPathTooLongIsRefusedFirst() throws {
        guard let path = ScenarioRunner.siblingExecutable("interluded") else { throw CocoaError(.fileNoSuchFile) }
        let w = try WorkFolder("e2e-longsock")
        defer { w.remove() }
        let socket = w.path + "/" + String(repeating: "s", count: 120) + "/socket"
        let r = try ChildProcess.run(path, ["--socket", socket, "--state", w.path + "/state", "--no-bus"], timeout: 20)
        #expect(r.exit == .exited(1), "\(r.stderr)")
        #expect(r.stderr.contains("socket path too long"), "\(r.stderr)")
        #expect(!r.stderr.contains("audio server"), "the audio server was joined first: \(r.stderr)")
    }

    /// `--name=value` as `--name value`, in the daemon and the CLI (both said "unknown").
    @Test func optionsTakeAValueAfterAnEqualsSign() throws {
        guard let path = ScenarioRunner.siblingExecutable("interluded"),
              let cli = ScenarioRunner.siblingExecutable("interlude") else { throw CocoaError(.fileNoSuchFile) }
        let w = try WorkFolder("e2e-equals")
        defer { w.remove() }
        let daemon = try ChildProcess(path, ["--socket=" + w.socket, "--state=" + w.path + "/state", "--private", "--no-bus"],
                                      stdin: .null, stdout: .null, stderr: .appendTo(w.path + "/log"))
        defer { daemon.kill() }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, daemon.isRunning, !SocketProbe.live(w.socket) { Thread.sleep(forTimeInterval: 0.05) }
        #expect(SocketProbe.live(w.socket), "\((try? String(contentsOfFile: w.path + "/log", encoding: .utf8)) ?? "")")
        #expect(FileManager.default.fileExists(atPath: w.path + "/state/interlude.lock"))
        let status = try ChildProcess.run(cli, ["--socket=" + w.socket, "status"], timeout: 20)
        #expect(status.status == 0 && status.stdout.contains("interluded"), "\(status.stdout) \(status.stderr)")
    }

    /// An empty path is a usage error (exit 2), not the root folder: `--state ""` put the lock and
    /// the database in `/`.
    @Test func anEmptyPathOptionIsAUsageError() throws {
        guard let path = ScenarioRunner.siblingExecutable("interluded") else { throw CocoaError(.fileNoSuchFile) }
        let w = try WorkFolder("e2e-empty-path")
        defer { w.remove() }
        for option in ["--state", "--socket", "--config", "--pulse-server"] {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: path)
            // The option once, empty (given twice it is refused for that first).
            p.arguments = (option == "--socket" ? [] : ["--socket", w.socket]) + (option == "--state" ? [] : ["--state", w.path + "/state"])
                + ["--private", "--no-bus", option, ""]
            let err = Pipe()
            p.standardError = err
            p.standardOutput = FileHandle.nullDevice
            try p.run()
            let said = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            #expect(p.terminationStatus == 2 && said.contains("\(option) needs a value"), "\(option) \"\": status \(p.terminationStatus): \(said)")
        }
        #expect(!FileManager.default.fileExists(atPath: w.path + "/state"), "a refused start must not make the state folder")
    }
}

/// A peer that went away is an error to the daemon, never its end: SIGPIPE is ignored from its
/// first line. It used to be ignored only once the daemon was up (with its signal handlers), so a
/// write to a closed socket or pipe during the start killed it silently: a log line to a standard
/// error nobody reads, or libmosquitto's write(2) to a broker that had dropped the connection
/// (RemoteEndToEndTests' SIGKILL test saw a restarted daemon end). Started as a service manager
/// or a shell does, with SIGPIPE at its default.
@Suite(.serialized) struct DaemonSignalEndToEndTests {
    @Test func aStandardErrorNobodyReadsDoesNotEndTheDaemon() throws {
        guard let path = ScenarioRunner.siblingExecutable("interluded") else { throw CocoaError(.fileNoSuchFile) }
        let w = try WorkFolder("e2e-sigpipe")
        defer { w.remove() }
        // fd 3: a pipe whose reader (`true`) has exited; the daemon's standard error goes there.
        let daemon = try ChildProcess("/bin/bash", ["-c", #"exec 3> >(exec true); sleep 0.3; exec "$0" "$@" 2>&3 3>&-"#,
                                                    path, "--socket", w.socket, "--private", "--no-bus", "--state", w.path + "/state"],
                                      stdin: .null, stdout: .null, stderr: .null)
        defer { daemon.kill() }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, daemon.isRunning, !SocketProbe.live(w.socket) { Thread.sleep(forTimeInterval: 0.05) }
        #expect(daemon.isRunning, "the daemon ended (\(daemon.exited.map { "\($0)" } ?? "?")) writing its log to a closed pipe")
        #expect(SocketProbe.live(w.socket))
        daemon.signal(SIGTERM)
        #expect(daemon.wait(timeout: 10) == .exited(0))
    }

    /// A SIGTERM sent as soon as the socket answers, or a few milliseconds later (a service manager
    /// stopping a daemon it has just started), stops the daemon with status 0, every time. The stop signals were watched
    /// only after the socket opened: such a SIGTERM ended the daemon by its default action (exit
    /// by signal 15) or was dropped and the daemon ran on (this suite's first test failed so on a
    /// loaded CI machine); and a stop during the start's sample uploads aborted it in libpulse
    /// (`pa_context_errno` on the context the stop had freed, exit by signal 6). In 40 such starts
    /// 3 hung, 3 died by signal 15 and 4 by signal 6; none since.
    @Test func aSIGTERMAsSoonAsTheSocketAnswersStopsTheDaemonCleanly() throws {
        guard let path = ScenarioRunner.siblingExecutable("interluded") else { throw CocoaError(.fileNoSuchFile) }
        var outcomes: [String: Int] = [:]
        for round in 0..<25 {
            let w = try WorkFolder("e2e-early-term-\(round)")
            defer { w.remove() }
            let daemon = try ChildProcess(path, ["--socket", w.socket, "--private", "--no-bus", "--state", w.path + "/state"],
                                          stdin: .null, stdout: .null, stderr: .appendTo(w.path + "/log"))
            defer { daemon.kill() }
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline, daemon.isRunning, !FileManager.default.fileExists(atPath: w.socket) { Thread.sleep(forTimeInterval: 0.001) }
            // At once, or up to 12 ms later: while the start still uploads its sounds.
            Thread.sleep(forTimeInterval: Double(round % 5) * 0.003)
            daemon.signal(SIGTERM)
            let end = daemon.wait(timeout: 10)
            outcomes[end.map { "\($0)" } ?? "still running 10 s later", default: 0] += 1
            if end != .exited(0) {
                let log = (try? String(contentsOfFile: w.path + "/log", encoding: .utf8)) ?? ""
                Issue.record("round \(round): \(end.map { "\($0)" } ?? "still running"); log: \(log.suffix(1500))")
            }
        }
        #expect(outcomes == ["\(ChildProcess.Exit.exited(0))": 25], "\(outcomes)")
    }

    /// The service manager's readiness protocol (the unit's `Type=notify`): `READY=1` once the
    /// socket serves (never before: a unit ordered after the daemon, or a `systemctl reload`,
    /// waits for it), with the socket named in `STATUS`, and `STOPPING=1` at SIGTERM. The manager
    /// here is a datagram socket of the test's, given as `$NOTIFY_SOCKET` (sd_notify(3)).
    @Test func theServiceManagerIsToldReadyOnceTheSocketServesAndStoppingAtSIGTERM() throws {
        guard let path = ScenarioRunner.siblingExecutable("interluded") else { throw CocoaError(.fileNoSuchFile) }
        let w = try WorkFolder("e2e-notify")
        defer { w.remove() }
        let manager = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        #expect(manager >= 0)
        defer { close(manager) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let managerPath = w.path + "/notify"
        _ = withUnsafeMutableBytes(of: &address.sun_path) { raw in managerPath.utf8CString.withUnsafeBytes { raw.copyMemory(from: $0) } }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(manager, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        var tv = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(manager, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        func message() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { recv(manager, $0.baseAddress, $0.count, 0) }
            return n > 0 ? String(decoding: buffer[..<n], as: UTF8.self) : nil
        }
        var env = ProcessInfo.processInfo.environment
        env["NOTIFY_SOCKET"] = managerPath
        let daemon = try ChildProcess(path, ["--socket", w.socket, "--private", "--no-bus", "--state", w.path + "/state"],
                                      stdin: .null, stdout: .null, stderr: .appendTo(w.path + "/log"), environment: env)
        defer { daemon.kill() }
        let ready = message()
        #expect(ready?.contains("READY=1") == true && ready?.contains("STATUS=listening on \(w.socket)") == true, "\(ready ?? "nothing")")
        #expect(SocketProbe.live(w.socket), "the socket serves when READY=1 comes")
        daemon.signal(SIGTERM)
        #expect(message() == "STOPPING=1")
        #expect(daemon.wait(timeout: 10) == .exited(0))
    }
}

/// A7 across a crash: a daemon killed with SIGKILL during a duck leaves the ducked stream quieter;
/// the next run (same state folder) takes the gain over and puts the user's volume back.
@Suite(.serialized) struct DuckAcrossACrashEndToEndTests {
    @Test(.enabled(if: AudioServer.required()))
    func A7_aDuckLeftByAKilledDaemonIsUndoneByTheNextRun() async throws {
        let w = try WorkFolder("e2e-crashduck")
        defer { w.remove() }
        let file = w.path + "/music.wav"
        try WAVFile.writeSine(path: file, frequency: 470, amplitude: 0.25, seconds: 30, sampleRate: 48000)
        var daemon = try DaemonProcess(socket: w.socket, work: w.path, config: false)
        let player = Process()
        player.executableURL = URL(fileURLWithPath: "/usr/bin/paplay")
        player.arguments = ["--property=media.role=music", "--property=interlude.daemon=\(w.socket)", "--client-name=crashduck", file]
        try player.run()
        defer { if player.isRunning { kill(player.processIdentifier, SIGKILL) }; player.waitUntilExit() }
        let pulse = PulseConnection(clientName: "interlude e2e crashduck")
        try pulse.connect()
        defer { pulse.disconnect() }
        func musicDb() -> Double? {
            (try? pulse.sinkInputs())?.first { $0.properties["interlude.daemon"] == w.socket && $0.role == "music" }?.volumeDb
        }
        // Until the stream is there with a volume: PipeWire's pulse server has been seen to list a
        // new stream at volume 0 (-200 dB) for a moment before its own (a clean-clone CI's
        // PipeWire pass, 2026-12-04).
        for _ in 0..<100 { guard musicDb().map({ $0 > -150 }) != true else { break }; try await Task.sleep(nanoseconds: 20_000_000) }
        #expect(musicDb().map { abs($0) < 0.1 } == true, "before: \(String(describing: musicDb()))")
        // The output too: the 470 Hz tone's level in a recording of the sink's monitor.
        let recorder = try PulseRecorder(connection: pulse, source: try pulse.defaultSinkName() + ".monitor")
        func heard(at t: Double) -> Double {
            ToneAnalysis.level(samples: recorder.samples(), sampleRate: 48000, frequency: 470, at: t - recorder.startTime)
        }

        let prompt = try await InterludeClient.connect(socket: w.socket, app: "org.example.Maps")
        let s = try await prompt.register(category: .playback, mode: .voicePrompt, options: [.duckOthers])
        _ = try await prompt.activate(s)  // replies after the duck ramp (A11)
        #expect(musicDb().map { abs($0 + 14) < 0.2 } == true, "ducked: \(String(describing: musicDb()))")

        daemon.kill9()
        prompt.close()
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(musicDb().map { abs($0 + 14) < 0.2 } == true, "a killed daemon cannot undo its duck: \(String(describing: musicDb()))")
        let whileDown = PulseClock.monotonicSeconds() - 0.1

        daemon = try DaemonProcess(socket: w.socket, work: w.path, config: false)
        defer { daemon.stop() }
        for _ in 0..<150 { guard musicDb().map({ abs($0) < 0.1 }) != true else { break }; try await Task.sleep(nanoseconds: 20_000_000) }
        #expect(musicDb().map { abs($0) < 0.1 } == true, "after the restart: \(String(describing: musicDb()))")
        try await Task.sleep(nanoseconds: 300_000_000)
        let restored = PulseClock.monotonicSeconds() - 0.1
        recorder.stop()
        #expect(abs(heard(at: whileDown) + 14) < 1.5, "recorded while the daemon was down: \(heard(at: whileDown)) dB")
        #expect(abs(heard(at: restored)) < 1, "recorded after the restart: \(heard(at: restored)) dB")
    }
}

/// A temporary folder for one test's daemon: its socket, state, log and config, and a user sound
/// folder (`data/interlude/sounds`, found through `XDG_DATA_HOME` in ``environment``). Removed by
/// ``remove()``.
struct WorkFolder {
    let path: String
    var socket: String { path + "/socket" }
    var sounds: String { path + "/data/interlude/sounds" }
    /// This process's environment with `XDG_DATA_HOME` pointing into the folder.
    var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["XDG_DATA_HOME"] = path + "/data"
        return env
    }
    init(_ name: String) throws {
        path = NSTemporaryDirectory() + "interlude-\(name)-\(getpid())"
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path + "/data/interlude/sounds", withIntermediateDirectories: true)
    }
    /// Writes `interlude.json5` (read with `DaemonProcess(config: true)`).
    func config(_ text: String) throws { try text.write(toFile: path + "/interlude.json5", atomically: true, encoding: .utf8) }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// A real `interluded` process on a private socket (`--private` unless `managing`), with its log in
/// `work/log` (or `log`).
final class DaemonProcess {
    let process: ChildProcess
    /// - Parameters:
    ///   - config: whether `work/interlude.json5` is read (`--config work`).
    ///   - configFolder: another folder for `--config` (with `config`).
    ///   - managing: without `--private`: it manages every stream of its audio server (only on a
    ///     server of the test's own).
    ///   - log: the log file's name in `work`.
    ///   - waitForSocket: wait (up to 20 s: a loaded machine starts a debug build slowly) until it
    ///     listens or exits.
    ///   - bus: join the session bus of `environment` (`--bus`; a `--private` daemon stays off it).
    init(socket: String, work: String, config: Bool = true, configFolder: String? = nil, environment: [String: String]? = nil,
         managing: Bool = false, log: String = "log", state: String = "state", waitForSocket: Bool = true,
         bus: Bool = false) throws {
        guard let path = ScenarioRunner.siblingExecutable("interluded") else { throw CocoaError(.fileNoSuchFile) }
        let daemonArguments = ["--socket", socket] + (managing ? [] : ["--private"]) + ["--state", work + "/" + state]
            + (config ? ["--config", configFolder ?? work] : []) + (bus ? ["--bus"] : [])
        // Standard error is appended to the log by the spawn itself (O_APPEND: each daemon's lines
        // follow the earlier ones'), and the daemon inherits no other descriptor of this process
        // (ChildProcess: Foundation's Process let a daemon inherit another child's descriptors).
        process = try ChildProcess(path, daemonArguments, stdin: .null, stdout: .inherit, stderr: .appendTo(work + "/" + log),
                                   environment: environment)
        let started = Date()
        for _ in 0..<400 { guard waitForSocket && !SocketProbe.live(socket) && process.isRunning else { break }; Thread.sleep(forTimeInterval: 0.05) }
        if waitForSocket && !SocketProbe.live(socket) {
            Self.explainNoListener(process, socket: socket, log: work + "/" + log, waited: Date().timeIntervalSince(started))
        }
    }

    /// Prints why a daemon that was to listen does not (a test that then fails to connect says
    /// only "Connection refused"): how long it was waited for, how it ended or, still running, its
    /// threads (gdb, when there), and the last lines of its log. As `[failure detail]` lines,
    /// which Scripts/test prints beside the failures; a test that expects the daemon to refuse
    /// to start prints them too, unread unless something fails.
    private static func explainNoListener(_ process: ChildProcess, socket: String, log: String, waited: Double) {
        var lines = ["interluded (pid \(process.pid)) is not listening on \(socket) after \(String(format: "%.1f", waited)) s: "
            + (process.exited.map { "it ended, \($0)" } ?? "it is still running")]
        if process.isRunning, FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb"),
           let r = try? ChildProcess.run("/usr/bin/gdb", ["-p", "\(process.pid)", "-batch", "-ex", "thread apply all bt 25"], timeout: 60) {
            // Each thread's first 10 frames: where it waits, and for what.
            var frames = 0
            for line in r.stdout.split(separator: "\n") {
                if line.hasPrefix("Thread ") { frames = 0 } else if line.hasPrefix("#") { frames += 1 } else { continue }
                if frames <= 10 { lines.append(String(line.prefix(200))) }
            }
        }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        lines.append("the last lines of its log \(log):")
        lines += text.split(separator: "\n").suffix(30).map(String.init)
        for line in lines { print("[failure detail] " + line) }
    }
    /// A daemon outlives no test: a test that throws in the middle leaves none running (it held
    /// the test runner's standard output, and `swift test` waited for it for ever).
    deinit { if process.isRunning { process.kill() } }
    var isRunning: Bool { process.isRunning }
    /// How it ended, once it has (nil while it runs).
    var exit: ChildProcess.Exit? { process.exited }
    func kill9() { process.kill() }
    func stop() { process.stop() }
    /// SIGTERM, as a service manager stops it; how it ended, or nil if it still runs after `timeout` s.
    func terminate(timeout: Double = 15) -> ChildProcess.Exit? {
        process.signal(SIGTERM)
        return process.wait(timeout: timeout)
    }
}

/// A daemon's log file as the tests read it. The daemon writes its log off the thread that logs
/// (LogWriter gathers lines for a few ms): a line about what was just answered may not be there
/// yet when the answer is.
enum LogFile {
    /// The log's text once it contains `text`, or as it is after `timeout` seconds.
    static func waitFor(_ text: String, in path: String, timeout: Double = 5) -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var said = ""
        repeat {
            said = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            if said.contains(text) { return said }
            Thread.sleep(forTimeInterval: 0.02)
        } while Date() < deadline
        return said
    }
}

/// Whether a daemon answers on a socket path.
enum SocketProbe {
    static func live(_ path: String) -> Bool { UnixSocket.isLive(path) }
}
