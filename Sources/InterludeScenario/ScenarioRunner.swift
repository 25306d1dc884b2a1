import Foundation
import InterludeClient
import InterludeConfig
import InterludePolicy
import InterludePulse
import InterludeWire

/// Runs a scenario (SCENARIOS.md) for real: a private daemon (its own socket, state and config =
/// `Config/` plus the scenario's `config`) on the current PulseAudio server, every session a
/// reference app playing its tone, unmodified-client streams through `paplay` with their
/// `media.role`, and expectations checked against the daemon's reports and the recording of the
/// output (each tone's level by frequency).
public final class ScenarioRunner: @unchecked Sendable {
    public struct Options: Sendable {
        /// The `interluded` to start; nil = next to this executable.
        public var daemon: String?
        /// Run against this socket's daemon instead of starting one (`--connect`).
        public var connectSocket: String?
        public var log: @Sendable (String) -> Void
        /// Warnings for the user (e.g. other audio on the output), always shown by the CLI.
        public var warn: @Sendable (String) -> Void
        public init(daemon: String? = nil, connectSocket: String? = nil, log: @escaping @Sendable (String) -> Void = { _ in },
                    warn: @escaping @Sendable (String) -> Void = { _ in }) {
            self.daemon = daemon; self.connectSocket = connectSocket; self.log = log; self.warn = warn
        }
    }

    /// The verdict on one expectation.
    public struct Outcome: Sendable {
        public var line: Int
        public var held: Bool
        /// e.g. "at 1.8 s music: state active (seen active), level [-16, -12] dB (seen -13.9 dB)".
        public var text: String
        public var at: Double
        public var session: String?
    }

    /// Everything a run produced.
    public struct Report: Sendable {
        public var outcomes: [Outcome]
        public var recording: [Float]
        /// Scenario time of the recording's first sample, seconds.
        public var recordingStart: Double
        public var sampleRate: Int
        public var daemonLog: String
        public var passed: Bool { outcomes.allSatisfy(\.held) }
    }

    struct SeenEvent { var time: Double; var event: WireEvent }

    let scenario: Scenario
    let options: Options
    let lock = NSLock()
    var events: [String: [SeenEvent]] = [:]
    var snapshots: [Double: StatusResult] = [:]
    /// What happened to each `notify` step's notification: when, and the decision or the error.
    var notifications: [String: (time: Double, decision: NotificationDecision?, error: WireError?)] = [:]
    var notifyClients: [String: InterludeClient] = [:]
    var start: Double = 0

    public init(_ scenario: Scenario, options: Options) {
        self.scenario = scenario
        self.options = options
    }

    public struct RunError: Error, CustomStringConvertible { public var description: String }

    /// Runs the scenario in real time and judges it.
    /// - Throws: ``RunError`` when the daemon or the audio server cannot be used.
    public func run() async throws -> Report {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("interlude-scenario-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }

        // The private daemon.
        var daemon: Process?
        let socket: String
        if let s = options.connectSocket { socket = s } else {
            socket = work + "/socket"
            if let config = scenario.config {
                try config.jsonText.write(toFile: work + "/interlude.json5", atomically: true, encoding: .utf8)
            }
            daemon = try startDaemon(socket: socket, work: work)
        }
        defer { daemon.map { ScenarioRunner.stop($0) } }

        let pulse = PulseConnection(clientName: "interlude scenario")
        do { try pulse.connect(timeout: 5) } catch { throw RunError(description: "no PulseAudio server: \(error)") }
        defer { pulse.disconnect() }
        let recorder = try PulseRecorder(connection: pulse, source: try pulse.defaultSinkName() + ".monitor")
        // Other audio on the sink is in the recording too: say so, since levels may then be off.
        let foreign = ((try? pulse.sinkInputs()) ?? []).filter { !$0.corked && $0.properties["interlude.daemon"] != socket }
        if !foreign.isEmpty {
            options.warn("warning: \(foreign.count) other stream(s) are playing on this output (\(foreign.map { $0.applicationName ?? "stream \($0.index)" }.joined(separator: ", "))); they are in the recording and may upset level checks")
        }

        var apps: [String: ReferenceApp] = [:]
        for s in scenario.sessions {
            let name = s.name
            let app = ReferenceApp(socket: socket, app: s.app, category: s.category, mode: s.mode, options: s.options,
                                   source: .sine(frequency: s.tone, amplitude: 0.25), pulse: pulse, obeys: s.obeys) { [weak self] e in
                self?.record(name, e)
            }
            try await app.register()
            apps[name] = app
        }
        // The user's side (ringer, focus) speaks as the user's tool.
        let control = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        var players: [String: Process] = [:]

        // The timeline: steps and status snapshots, in time order.
        enum Item { case step(Scenario.Step); case snapshot(Double) }
        var items: [(Double, Int, Item)] = scenario.steps.enumerated().map { ($0.element.at, $0.offset, .step($0.element)) }
        for (i, t) in Set(scenario.expectations.compactMap(\.at)).enumerated() { items.append((t, 100_000 + i, .snapshot(t))) }
        items.sort { ($0.0, $0.1) < ($1.0, $1.1) }

        start = PulseClock.monotonicSeconds()
        for (t, _, item) in items {
            await sleep(until: t)
            switch item {
            case let .step(step):
                options.log(String(format: "%6.2f s  step: %@", now(), "\(step.action)"))
                try await perform(step.action, apps: apps, control: control, mixer: pulse, players: &players, work: work, socket: socket)
            case let .snapshot(at):
                if let st = try? await control.status() { lock.withLock { snapshots[at] = st } }
            }
        }
        await sleep(until: scenario.duration)
        recorder.stop()
        for p in players.values where p.isRunning { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() }
        for a in apps.values { a.crash() }
        control.close()
        for c in notifyClients.values { c.close() }

        let recording = recorder.samples()
        let recordingStart = recorder.startTime - start
        var report = Report(outcomes: [], recording: recording, recordingStart: recordingStart, sampleRate: 48000, daemonLog: "")
        report.outcomes = scenario.expectations.map { judge($0, apps: apps, report: report) }
        daemon.map { ScenarioRunner.stop($0) }
        report.daemonLog = (try? String(contentsOfFile: work + "/daemon.log", encoding: .utf8)) ?? ""
        return report
    }

    func now() -> Double { PulseClock.monotonicSeconds() - start }

    func sleep(until t: Double) async {
        let d = t - now()
        if d > 0 { try? await Task.sleep(nanoseconds: UInt64(d * 1e9)) }
    }

    func record(_ session: String, _ e: WireEvent) {
        let t = now()
        lock.withLock { events[session, default: []].append(SeenEvent(time: t, event: e)) }
    }

    func startDaemon(socket: String, work: String) throws -> Process {
        let path = options.daemon ?? ScenarioRunner.siblingExecutable("interluded")
        guard let path, FileManager.default.isExecutableFile(atPath: path) else {
            throw RunError(description: "cannot find interluded next to this program; build it with swift build")
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        var args = ["--socket", socket, "--state", work + "/state", "--private", "--exit-with-parent"]
        if scenario.config != nil { args += ["--config", work] }
        p.arguments = args
        _ = FileManager.default.createFile(atPath: work + "/daemon.log", contents: nil)
        p.standardError = FileHandle(forWritingAtPath: work + "/daemon.log")
        p.standardOutput = FileHandle.nullDevice  // never hold the runner's stdout (a pipe) open
        var env = ProcessInfo.processInfo.environment
        env["INTERLUDE_CONFIG_DIR"] = nil
        p.environment = env
        try p.run()
        for _ in 0..<100 {
            if FileManager.default.fileExists(atPath: socket) { return p }
            if !p.isRunning { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        let log = (try? String(contentsOfFile: work + "/daemon.log", encoding: .utf8)) ?? ""
        p.terminate()
        throw RunError(description: "the private daemon did not start:\n\(log)")
    }

    /// Stops a child process: SIGTERM, then SIGKILL if it is still running after `grace` seconds,
    /// and waits for it. A daemon that hangs on its way out must not hang its runner.
    public static func stop(_ p: Process, grace: Double = 5) {
        guard p.isRunning else { p.waitUntilExit(); return }
        p.terminate()
        let deadline = Date().addingTimeInterval(grace)
        while p.isRunning && Date() < deadline { usleep(10_000) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
    }

    /// An executable in the same folder as this program (or the test bundle).
    public static func siblingExecutable(_ name: String) -> String? {
        let candidates = [Bundle.main.executableURL, URL(fileURLWithPath: CommandLine.arguments[0])].compactMap { $0 }
        for c in candidates {
            var dir = c.resolvingSymlinksInPath().deletingLastPathComponent()
            for _ in 0..<4 {
                let p = dir.appendingPathComponent(name).path
                if FileManager.default.isExecutableFile(atPath: p) { return p }
                dir = dir.deletingLastPathComponent()
            }
        }
        return nil
    }

    /// Carries out one step. `mixer` is the runner's own server connection: a `volume` step writes
    /// the user's volume through it, as a mixer application would (A7).
    func perform(_ a: Scenario.Action, apps: [String: ReferenceApp], control: InterludeClient, mixer: PulseConnection,
                 players: inout [String: Process], work: String, socket: String) async throws {
        switch a {
        case let .activate(s, delay):
            // The reply is an event of the timeline too: A11 says when it may arrive.
            do {
                let r = try await apps[s]!.activate(acceptsDelay: delay)
                record(s, WireEvent(event: "activationReplied", data: .object(["state": .string(r.state.rawValue),
                    "promptStyle": r.promptStyle.map { .string($0.rawValue) } ?? .null]), time: 0))
            } catch let e as WireError {
                record(s, WireEvent(event: "activationFailed", data: .object(["reason": .string(e.code.rawValue)]), time: 0))
            } catch {
                record(s, WireEvent(event: "activationFailed", data: .object(["reason": .string("\(error)")]), time: 0))
            }
        case let .deactivate(s, notify): await apps[s]!.stop(notifyOthers: notify)
        case let .pause(s): apps[s]!.setUserPaused(true)
        case let .play(s): apps[s]!.setUserPaused(false)
        case let .crash(s): apps[s]!.crash()
        case let .volume(s, db):
            if let idx = apps[s]!.sinkInput { try await mixer.setUserVolume(sinkInput: idx, db: db) }
        case let .stream(x, role, tone):
            let file = work + "/\(x).wav"
            try WAVFile.writeSine(path: file, frequency: tone, amplitude: 0.25, seconds: scenario.duration + 2, sampleRate: 48000)
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/paplay")
            // An unmodified client: no session, only its role (A10). The daemon marker keeps other
            // daemons on this server (a user's) from managing the test stream.
            p.arguments = ["--property=media.role=\(role)", "--property=interlude.daemon=\(socket)",
                           "--client-name=\(x)", "--latency-msec=50", file]
            try p.run()
            players[x] = p
        case let .closeStream(x):
            // The client goes away at once (SIGKILL: no drain of its buffer).
            if let p = players[x], p.isRunning { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() }
        case let .ringer(silent):
            try await control.setRinger(silent: silent)
        case let .focus(name):
            _ = try await control.call(NotificationMethod.focusSet, FocusSetParams(name: name == "off" ? nil : name), as: FocusStatusResult.self)
        case let .notify(id, fields):
            await notify(id, fields, socket: socket)
        }
    }

    /// A `notify` step: the app connects (once), asks for authorization (N1) and adds the request.
    func notify(_ id: String, _ f: [String: ConfigValue], socket: String) async {
        func str(_ k: String) -> String? { if case let .string(s)? = f[k] { return s } else { return nil } }
        func num(_ k: String) -> Double? { if case let .number(n)? = f[k] { return n } else { return nil } }
        let t = now()
        let app = str("app") ?? "org.example.App"
        let level: InterruptionLevel? = str("level").flatMap {
            ["passive": .passive, "active": .active, "timeSensitive": .timeSensitive, "critical": .critical][$0]
        }
        do {
            let client: InterludeClient
            if let c = notifyClients[app] { client = c } else {
                client = try await InterludeClient.connect(socket: socket, app: app)
                _ = try await client.call(NotificationMethod.requestAuthorization,
                                          RequestAuthorizationParams(options: [.alert, .sound, .badge, .criticalAlert]), as: AuthorizationResult.self)
                notifyClients[app] = client
            }
            var promotional: Bool?
            if case let .bool(b)? = f["promotional"] { promotional = b }
            let p = AddNotificationParams(identifier: str("id") ?? id, title: str("title") ?? id, body: str("body"),
                                          sound: str("sound"), criticalVolume: num("criticalVolume"), thread: str("thread"),
                                          level: level, promotional: promotional, sender: str("sender"))
            let r = try await client.call(NotificationMethod.add, p, as: AddNotificationResult.self)
            lock.withLock { notifications[id] = (t, r.decision, nil) }
            options.log(String(format: "%6.2f s  %@: %@", t, id, r.decision.rules.joined(separator: ",")))
        } catch let e as WireError {
            lock.withLock { notifications[id] = (t, nil, e) }
        } catch {
            lock.withLock { notifications[id] = (t, nil, WireError(.internalError, "\(error)")) }
        }
    }

    /// Peak level (dBFS) of the recording between two scenario times.
    func peakDb(_ report: Report, from t1: Double, to t2: Double) -> Double {
        let a = max(0, Int((t1 - report.recordingStart) * Double(report.sampleRate)))
        let b = min(report.recording.count, Int((t2 - report.recordingStart) * Double(report.sampleRate)))
        guard a < b else { return -200 }
        let peak = report.recording[a..<b].reduce(Float(0)) { max($0, abs($1)) }
        return peak > 0 ? 20 * log10(Double(peak)) : -200
    }

    /// A `notification` expectation: the decision (sound played or silent, the rule that decided)
    /// and, when no tone plays in the scenario, the recording (sound at the output or not).
    func judgeNotification(_ e: Scenario.Expectation, _ n: String, report: Report) -> Outcome {
        guard let seen = lock.withLock({ notifications[n] }) else {
            return Outcome(line: e.line, held: false, text: "notification \(n): never sent", at: 0, session: nil)
        }
        var parts: [String] = []
        var held = true
        if let err = seen.error {
            held = e.reason == err.code.rawValue
            return Outcome(line: e.line, held: held, text: "notification \(n): rejected \(err.code.rawValue) (\(err.message))", at: seen.time, session: nil)
        }
        let d = seen.decision!
        if let want = e.sound {
            let played = d.sound != nil
            if (want == "played") != played { held = false }
            parts.append("sound \(want) (decided: \(d.sound.map { "\($0.name) at \(Int(($0.volume * 100).rounded())) %" } ?? "silent"))")
            if scenario.sessions.isEmpty && scenario.streamTones.isEmpty {
                // Nothing else plays: the output itself says whether a sound was heard.
                let nextNotify = lock.withLock { notifications.values.map(\.time).filter { $0 > seen.time + 0.01 }.min() }
                let end = min(seen.time + Scenario.soundListenSeconds, nextNotify ?? .infinity)
                let peak = peakDb(report, from: seen.time, to: end)
                let audible = peak > Scenario.audiblePeakDbfs
                if (want == "played") != audible { held = false }
                parts.append(String(format: "recording peak %.1f dBFS", max(peak, -120)))
            }
        }
        if let r = e.reason {
            if !d.rules.contains(r) { held = false }
            parts.append("reason \(r) (rules \(d.rules.joined(separator: ", ")))")
        }
        return Outcome(line: e.line, held: held, text: "notification \(n): " + parts.joined(separator: ", "), at: seen.time, session: nil)
    }

    // MARK: Judging

    func level(of name: String, at t: Double, report: Report) -> Double? {
        guard let hz = scenario.session(name)?.tone ?? scenario.streamTones[name] else { return nil }
        return ToneAnalysis.level(samples: report.recording, sampleRate: report.sampleRate, frequency: hz,
                                  at: t - report.recordingStart)
    }

    func judge(_ e: Scenario.Expectation, apps: [String: ReferenceApp], report: Report) -> Outcome {
        if let n = e.notification { return judgeNotification(e, n, report: report) }
        let name = e.session!
        var parts: [String] = []
        var held = true
        if let ev = e.event {
            let (t1, t2) = e.between ?? (e.at! - Scenario.eventWindowSeconds, e.at! + Scenario.eventWindowSeconds)
            let seen = lock.withLock { events[name] ?? [] }
            let match = seen.first { s in
                s.event.event == ev && s.time >= t1 && s.time <= t2 + Scenario.eventDeliverySeconds
                    && (e.shouldResume.map { s.event.data["shouldResume"]?.boolValue == $0 } ?? true)
                    && (e.reason.map { s.event.data["reason"]?.stringValue == $0 } ?? true)
                    && (e.promptStyle.map { s.event.data["promptStyle"]?.stringValue == $0 } ?? true)
            }
            held = match != nil
            var want = ev
            if let r = e.shouldResume { want += " shouldResume=\(r)" }
            if let r = e.reason { want += " reason=\(r)" }
            if let r = e.promptStyle { want += " promptStyle=\(r)" }
            let got = seen.map { String(format: "%@ at %.2f s", $0.event.event, $0.time) }.joined(separator: ", ")
            return Outcome(line: e.line, held: held,
                           text: String(format: "between %@ and %@ s %@: event %@ (%@)", fmt(t1), fmt(t2), name, want,
                                        match.map { String(format: "seen at %.2f s", $0.time) } ?? "seen: \(got.isEmpty ? "none" : got)"),
                           at: t1, session: name)
        }
        let at = e.at!
        let snapshot = lock.withLock { snapshots[at] }
        let sessionID = apps[name]?.session
        let status = snapshot?.sessions.first { $0.session == sessionID }
        if let want = e.state {
            let seen = status?.state.rawValue ?? "not registered"
            if status?.state != want { held = false }
            parts.append("state \(want.rawValue) (seen \(seen))")
        }
        if let want = e.ducked {
            let seen = status.map { $0.ducked ? "true" : "false" } ?? "?"
            if status?.ducked != want { held = false }
            parts.append("ducked \(want) (seen \(seen))")
        }
        if let want = e.level {
            let db = level(of: name, at: at, report: report) ?? -200
            if !want.holds(db) { held = false }
            parts.append(String(format: "level %@ (seen %.1f dB)", want.description, max(db, -120)))
        }
        return Outcome(line: e.line, held: held, text: "at \(fmt(at)) s \(name): " + parts.joined(separator: ", "), at: at, session: name)
    }
}

/// Minimal WAV writing for recordings and the unmodified-client tones (16-bit PCM, mono).
public enum WAVFile {
    /// Writes mono float samples (−1…1) as 16-bit PCM.
    public static func write(path: String, samples: [Float], sampleRate: Int) throws {
        var data = Data()
        func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        let bytes = UInt32(samples.count * 2)
        data.append(contentsOf: Array("RIFF".utf8)); u32(36 + bytes); data.append(contentsOf: Array("WAVE".utf8))
        data.append(contentsOf: Array("fmt ".utf8)); u32(16); u16(1); u16(1); u32(UInt32(sampleRate)); u32(UInt32(sampleRate * 2)); u16(2); u16(16)
        data.append(contentsOf: Array("data".utf8)); u32(bytes)
        var pcm = [Int16](repeating: 0, count: samples.count)
        for (i, s) in samples.enumerated() { pcm[i] = Int16(max(-32768, min(32767, (Double(s) * 32767).rounded()))) }
        pcm.withUnsafeBytes { data.append(contentsOf: $0) }
        try data.write(to: URL(fileURLWithPath: path))
    }

    /// Writes a sine of `amplitude` (0…1 of full scale) at `frequency` Hz.
    public static func writeSine(path: String, frequency: Double, amplitude: Double, seconds: Double, sampleRate: Int) throws {
        let n = Int(seconds * Double(sampleRate))
        let w = 2 * Double.pi * frequency / Double(sampleRate)
        try write(path: path, samples: (0..<n).map { Float(amplitude * sin(w * Double($0))) }, sampleRate: sampleRate)
    }
}
