import Foundation
import Testing
import InterludeAudioPorts
import InterludeClient
import InterludePulse
import InterludeScenario
import InterludeTestSupport
import InterludeWire

/// The audio server as the daemon and the CLI's reference app share it, on a private server of each
/// test's own (``PrivateAudioServer``: PulseAudio, or PipeWire in the PipeWire pass), which the test
/// can kill and restart, with levels measured in the recording of its null sink's monitor.
/// Issue 7 holes 12 (two daemons on one audio server) and 13 (the reference app after a restart).
@Suite(.serialized) struct AudioServerEndToEndTests {
    /// What the test hears: a recording of the private server's monitor, on a connection of its own.
    final class Ears {
        let pulse: PulseConnection
        let recorder: PulseRecorder
        init(_ server: String) throws {
            pulse = PulseConnection(server: server, clientName: "interlude e2e ears")
            try pulse.connect()
            recorder = try PulseRecorder(connection: pulse, source: try pulse.defaultSinkName() + ".monitor")
        }
        /// Levels (dB, 0 = a 0.25 sine) of `hz` in 40 ms windows whose centres lie in the `seconds`
        /// just past, waiting for them to be recorded.
        func levels(_ hz: Double, last seconds: Double) async -> [Double] {
            let t1 = PulseClock.monotonicSeconds(), t0 = t1 - seconds
            let deadline = t1 + 5
            while recorder.startTime + Double(recorder.samples().count) / 48000 < t1 + 0.1, PulseClock.monotonicSeconds() < deadline {
                try? await Task.sleep(for: .milliseconds(10))
            }
            let all = ToneAnalysis.levels(samples: recorder.samples(), sampleRate: 48000, frequency: hz)
            return all.enumerated().filter { i, _ in
                let centre = recorder.startTime + Double(i) * 0.02 + 0.02
                return centre >= t0 && centre <= t1
            }.map(\.element)
        }
        /// The median level of `hz` over the `seconds` just past.
        func median(_ hz: Double, last seconds: Double = 0.5) async -> Double {
            let l = await levels(hz, last: seconds).sorted()
            return l.isEmpty ? -.infinity : l[l.count / 2]
        }
        func stop() { recorder.stop(); pulse.disconnect() }
    }

    /// `paplay` of a looped-long sine as an unmodified app (no `interlude.daemon`): managed by
    /// every daemon that manages all streams, with an implicit session from its role (A10).
    static func player(_ server: String, _ file: String, role: String, name: String) throws -> ChildProcess {
        try ChildProcess("/usr/bin/paplay", ["--server=\(server)", "--property=media.role=\(role)", "--client-name=\(name)", file])
    }

    /// The sink input of the client named `name`, on `pulse`.
    static func stream(_ pulse: PulseConnection, _ name: String) -> PulseSinkInput? {
        (try? pulse.sinkInputs())?.first { $0.applicationName == name }
    }

    static func waitFor(_ seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = PulseClock.monotonicSeconds() + seconds
        while !condition() {
            if PulseClock.monotonicSeconds() > deadline { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Music (470 Hz, role `music`) ducked by an unmodified event sound (1000 Hz, role `event`,
    /// an implicit ducker, A10): with one manager the music sits at the duck level (−14 dB) and
    /// comes back to 0 dB when the event sound ends. Two managers each took the other's duck for
    /// the user's volume (A7) and ducked it again: −213 dB, for good.
    static func checkOneManagerDucks(_ audio: PrivateAudioServer, work: String, label: String) async throws {
        let music = work + "/music.wav", event = work + "/event.wav"
        try WAVFile.writeSine(path: music, frequency: 470, amplitude: 0.25, seconds: 30, sampleRate: 48000)
        try WAVFile.writeSine(path: event, frequency: 1000, amplitude: 0.25, seconds: 30, sampleRate: 48000)
        let ears = try Ears(audio.server)
        defer { ears.stop() }
        let m = try player(audio.server, music, role: "music", name: "e2e-music")
        defer { end(m) }
        #expect(await waitFor(5) { stream(ears.pulse, "e2e-music") != nil })
        try await Task.sleep(for: .milliseconds(700))
        let e = try player(audio.server, event, role: "event", name: "e2e-event")
        defer { end(e) }
        // Volumes as pactl would list them, every 50 ms for 2.5 s: ducked, never below the duck level.
        var lowest = 0.0, last = 0.0
        let until = PulseClock.monotonicSeconds() + 2.5
        while PulseClock.monotonicSeconds() < until {
            if let v = stream(ears.pulse, "e2e-music")?.volumeDb { lowest = min(lowest, v); last = v }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(lowest > -15, "\(label): the music's volume went down to \(lowest) dB (duck level -14)")
        #expect(abs(last + 14) < 0.5, "\(label): the music's volume \(last) dB while the event sound plays")
        let heard = await ears.median(470)
        #expect(abs(heard + 14) < 1.5, "\(label): the music recorded at \(heard) dB while ducked")
        end(e)
        try await Task.sleep(for: .milliseconds(1500))
        let back = stream(ears.pulse, "e2e-music")?.volumeDb ?? -.infinity
        let heardBack = await ears.median(470)
        #expect(abs(back) < 0.2, "\(label): the music's volume \(back) dB after the event sound")
        #expect(abs(heardBack) < 1, "\(label): the music recorded at \(heardBack) dB after the event sound")
        print("[measured] \(label): music lowest \(String(format: "%.1f", lowest)) dB, ducked \(String(format: "%.1f", heard)) dB recorded, after \(String(format: "%.1f", heardBack)) dB")
    }

    /// The built `interlude` with `args` on `socket`, its standard output collected.
    static func cli(_ socket: String, _ env: [String: String], _ args: [String]) throws -> (ChildProcess, Output) {
        guard let cli = ScenarioRunner.siblingExecutable("interlude") else { throw CocoaError(.fileNoSuchFile) }
        let p = try ChildProcess(cli, ["--socket", socket] + args, stdout: .capture, stderr: .null, environment: env)
        return (p, Output(child: p))
    }

    /// A CLI's standard output, read once it ends.
    struct Output {
        let child: ChildProcess
        /// Everything it wrote (waits for it to close its standard output).
        func text() -> String { child.output() }
    }

    /// A private audio server of the test's own and a work folder whose environment points at it
    /// (`PULSE_SERVER`): what most tests here start with. ``stop()`` removes the folder, then
    /// stops the server.
    struct OwnAudioServer {
        let audio: PrivateAudioServer
        let work: WorkFolder
        let environment: [String: String]

        /// Starts the server (`name` names its folder and the work folder).
        static func start(_ name: String) async throws -> OwnAudioServer {
            let audio = try PrivateAudioServer(name)
            do {
                try await audio.start()
                let work = try WorkFolder(name)
                var environment = work.environment
                environment["PULSE_SERVER"] = audio.server
                return OwnAudioServer(audio: audio, work: work, environment: environment)
            } catch {
                audio.stop()
                throw error
            }
        }

        func stop() {
            work.remove()
            audio.stop()
        }
    }

    static func end(_ p: ChildProcess) { p.kill() }

    static func log(_ work: String, _ name: String) -> String {
        (try? String(contentsOfFile: work + "/" + name, encoding: .utf8)) ?? ""
    }

    @Test(.enabled(if: AudioServer.required()))
    func oneManagerPerAudioServer_aSecondDaemonRefusesWithStatus75() async throws {
        let own = try await OwnAudioServer.start("e2e-managers")
        defer { own.stop() }
        let (audio, w, env) = (own.audio, own.work, own.environment)
        let first = try DaemonProcess(socket: w.path + "/first", work: w.path, config: false, environment: env,
                                      managing: true, log: "first.log", state: "state1")
        defer { first.stop() }
        #expect(first.isRunning)
        let started = PulseClock.monotonicSeconds()
        let second = try DaemonProcess(socket: w.path + "/second", work: w.path, config: false, environment: env,
                                       managing: true, log: "second.log", state: "state2")
        defer { second.stop() }
        #expect(await Self.waitFor(5) { !second.isRunning }, "the second daemon keeps running")
        #expect(second.exit == .exited(75), "second daemon: \(second.exit.map { "\($0)" } ?? "running")")
        let said = Self.log(w.path, "second.log")
        #expect(said.contains("another interluded") && said.contains(w.path + "/first") && said.contains("[anotherManager]"), "\(said)")
        #expect(!SocketProbe.live(w.path + "/second"), "a refusing daemon must not listen")
        if !second.isRunning { print("[measured] second daemon refused \(String(format: "%.2f", PulseClock.monotonicSeconds() - started)) s after it started") }
        try await Self.checkOneManagerDucks(audio, work: w.path, label: "two daemons started")
        #expect(first.isRunning)

        // A SIGKILLed manager leaves no claim behind: the next daemon starts and manages.
        first.kill9()
        let third = try DaemonProcess(socket: w.path + "/third", work: w.path, config: false, environment: env,
                                      managing: true, log: "third.log", state: "state3")
        defer { third.stop() }
        try await Task.sleep(for: .milliseconds(1000))
        #expect(third.isRunning && SocketProbe.live(w.path + "/third"), "after a SIGKILL of the manager: \(Self.log(w.path, "third.log"))")
        try await Self.checkOneManagerDucks(audio, work: w.path, label: "after the manager was SIGKILLed")
    }

    /// Two daemons started at the same moment: whichever decides first, exactly one keeps managing
    /// (the other sees the earlier announcement, at start or when it arrives, and exits 75).
    @Test(.enabled(if: AudioServer.required()))
    func twoDaemonsStartedAtOnceLeaveOneManager() async throws {
        let own = try await OwnAudioServer.start("e2e-managers-race")
        defer { own.stop() }
        let (audio, w, env) = (own.audio, own.work, own.environment)
        let a = try DaemonProcess(socket: w.path + "/a", work: w.path, config: false, environment: env,
                                  managing: true, log: "a.log", state: "stateA", waitForSocket: false)
        defer { a.stop() }
        let b = try DaemonProcess(socket: w.path + "/b", work: w.path, config: false, environment: env,
                                  managing: true, log: "b.log", state: "stateB", waitForSocket: false)
        defer { b.stop() }
        #expect(await Self.waitFor(10) { !a.isRunning || !b.isRunning }, "both daemons still manage")
        try await Task.sleep(for: .milliseconds(1000))
        #expect(a.isRunning != b.isRunning, "exactly one daemon stays")
        let gone = a.isRunning ? b : a
        #expect(gone.exit == .exited(75))
        let said = Self.log(w.path, gone === a ? "a.log" : "b.log")
        #expect(said.contains("[anotherManager]"), "\(said)")
        print("[measured] two started at once: the other exited \(said.contains("already manages") ? "at its start-up check" : "when it saw the earlier announcement")")
        try await Self.checkOneManagerDucks(audio, work: w.path, label: "two started at once")
    }

    /// A frozen audio server (SIGSTOP: its socket open, nothing answers): `interlude status` is
    /// answered while notification sounds wait for the server (a stranger's find: `status` waited
    /// behind them, 19 s for one, and the CLI gave up after 30 s with three).
    @Test(.enabled(if: AudioServer.required()))
    func statusIsAnsweredWhileSoundsWaitForAFrozenAudioServer() async throws {
        let own = try await OwnAudioServer.start("e2e-frozen")
        defer { own.stop() }
        let (audio, w, env) = (own.audio, own.work, own.environment)
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, config: false, environment: env)
        defer { daemon.stop() }
        try await Task.sleep(for: .milliseconds(500))
        try audio.signal(SIGSTOP)
        defer { try? audio.signal(SIGCONT) }
        // Three apps' notifications with a sound: delivered, their sounds queue for the server.
        for i in 0..<3 {
            let (grant, _) = try Self.cli(w.socket, env, ["auth", "org.example.Frozen\(i)", "grant"])
            grant.wait()
            let (p, _) = try Self.cli(w.socket, env, ["notify", "--app", "org.example.Frozen\(i)", "--title", "t\(i)", "--sound", "default"])
            let started = PulseClock.monotonicSeconds()
            while p.isRunning, PulseClock.monotonicSeconds() - started < 10 { try await Task.sleep(for: .milliseconds(20)) }
            #expect(p.exited == .exited(0), "notify \(i) with the audio server frozen")
        }
        let started = PulseClock.monotonicSeconds()
        let (status, out) = try Self.cli(w.socket, env, ["status"])
        while status.isRunning, PulseClock.monotonicSeconds() - started < 30 { try await Task.sleep(for: .milliseconds(20)) }
        let took = PulseClock.monotonicSeconds() - started
        #expect(status.exited == .exited(0), "status: \(status.exited.map { "\($0)" } ?? "running")")
        if !status.isRunning { #expect(out.text().contains("interluded"), "status: \(out.text())") }
        #expect(took < 8, "status took \(took) s while sounds waited for the frozen server")
        print("[measured] status with the audio server frozen and 3 sounds waiting: \(String(format: "%.2f", took)) s")
        if status.isRunning { status.kill() }
    }

    /// A frozen audio server is left alone after it did not answer (PulseSoundPlayer's pause,
    /// `retryAfterUnanswered`): the first sound waits `operationTimeout` (10 s) and fails with
    /// `audioUnavailable`; the next fails at once with the same code and says when the server is
    /// asked again (each waited 10–20 s in turn before, a stranger's find); once the server is back
    /// and the pause over, sounds play again.
    @Test(.enabled(if: AudioServer.required()))
    func soundsFailFastWhileAFrozenAudioServerIsLeftAlone() async throws {
        let own = try await OwnAudioServer.start("e2e-frozen-pause")
        defer { own.stop() }
        let (audio, w, env) = (own.audio, own.work, own.environment)
        guard let cli = ScenarioRunner.siblingExecutable("interlude") else { throw CocoaError(.fileNoSuchFile) }
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, config: false, environment: env)
        defer { daemon.stop() }
        try await Task.sleep(for: .milliseconds(500))
        func play() throws -> (ChildProcess.Result, Double) {
            let t0 = PulseClock.monotonicSeconds()
            let r = try ChildProcess.run(cli, ["--socket", w.socket, "play", "default"], timeout: 60, environment: env)
            return (r, PulseClock.monotonicSeconds() - t0)
        }
        #expect(try play().0.exit == .exited(0), "plays before the freeze")
        try audio.signal(SIGSTOP)
        var frozen = true
        defer { if frozen { try? audio.signal(SIGCONT) } }
        let (first, firstTook) = try play()
        #expect(first.exit != .exited(0) && first.stderr.contains("audioUnavailable"), "\(first.stdout) \(first.stderr)")
        let (second, secondTook) = try play()
        #expect(second.exit != .exited(0) && second.stderr.contains("audioUnavailable") && second.stderr.contains("did not answer"),
                "\(second.stdout) \(second.stderr)")
        #expect(secondTook < 2, "the second sound waited \(secondTook) s for the frozen server")
        // `status` says so (it said only "audio server connected", a stranger's find), at once.
        let status = try ChildProcess.run(cli, ["--socket", w.socket, "status"], timeout: 10, environment: env)
        #expect(status.exit == .exited(0) && status.stdout.contains("sounds: the audio server did not answer"), "\(status.stdout) \(status.stderr)")
        // Still frozen after the pause: status says the last call went unanswered (it said nothing).
        try await Task.sleep(for: .seconds(PulseSoundPlayer.retryAfterUnanswered + 0.5))
        let later = try ChildProcess.run(cli, ["--socket", w.socket, "status"], timeout: 10, environment: env)
        #expect(later.exit == .exited(0) && later.stdout.contains("sounds: the audio server left its last call unanswered"), "\(later.stdout)")
        try audio.signal(SIGCONT)
        frozen = false
        try await Task.sleep(for: .seconds(PulseSoundPlayer.retryAfterUnanswered + 0.5))
        let (third, _) = try play()
        #expect(third.exit == .exited(0), "after the server is back: \(third.stdout) \(third.stderr)")
        let after = try ChildProcess.run(cli, ["--socket", w.socket, "status"], timeout: 10, environment: env)
        #expect(after.exit == .exited(0) && !after.stdout.contains("sounds:"), "\(after.stdout)")
        print("[measured] frozen audio server: first sound failed after \(String(format: "%.1f", firstTook)) s, the next after \(String(format: "%.2f", secondTook)) s")
    }

    /// The watch: a manager that sees a client announce the claim earlier than its own (here a
    /// `paplay` given the properties of one, stamped 1 ns after 1970: what a daemon that connected
    /// at the same moment and decided later looks like) hands off and exits 75.
    @Test(.enabled(if: AudioServer.required()))
    func aManagerHandsOffToAnEarlierAnnouncement() async throws {
        let own = try await OwnAudioServer.start("e2e-managers-watch")
        defer { own.stop() }
        let (audio, w, env) = (own.audio, own.work, own.environment)
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, config: false, environment: env, managing: true)
        defer { daemon.stop() }
        try await Task.sleep(for: .milliseconds(500))
        #expect(daemon.isRunning)
        let file = w.path + "/quiet.wav"
        try WAVFile.writeSine(path: file, frequency: 300, amplitude: 0.01, seconds: 20, sampleRate: 48000)
        var pe = env
        pe["PULSE_PROP"] = "interlude.manager=/earlier/socket interlude.manager.uid=\(PulseClaim.currentUID) interlude.manager.since=1"
        let earlier = try ChildProcess("/usr/bin/paplay", ["--server=\(audio.server)", file], environment: pe)
        defer { Self.end(earlier) }
        #expect(await Self.waitFor(5) { !daemon.isRunning }, "the manager ignored an earlier announcement")
        #expect(daemon.exit == .exited(75))
        let said = Self.log(w.path, "log")
        #expect(said.contains("announced itself first") && said.contains("/earlier/socket"), "\(said)")
    }

    /// After an audio-server restart both daemons reconnect: the first to announce itself again
    /// holds the claim; the other exits 75 instead of fighting. The second daemon here starts while
    /// the server is down (it cannot check at start, so it waits for the server like the first).
    @Test(.enabled(if: AudioServer.required()))
    func oneManagerAfterAnAudioServerRestart() async throws {
        let own = try await OwnAudioServer.start("e2e-managers-restart")
        defer { own.stop() }
        let (audio, w, env) = (own.audio, own.work, own.environment)
        let first = try DaemonProcess(socket: w.path + "/first", work: w.path, config: false, environment: env,
                                      managing: true, log: "first.log", state: "state1")
        defer { first.stop() }
        try audio.kill()
        try await Task.sleep(for: .milliseconds(300))
        let second = try DaemonProcess(socket: w.path + "/second", work: w.path, config: false, environment: env,
                                       managing: true, log: "second.log", state: "state2")
        defer { second.stop() }
        #expect(second.isRunning, "a daemon that cannot reach the server waits for it")
        try await audio.start()
        #expect(await Self.waitFor(15) { !first.isRunning || !second.isRunning }, "both daemons still manage")
        try await Task.sleep(for: .milliseconds(500))
        let (gone, kept) = first.isRunning ? (second, first) : (first, second)
        #expect(gone.exit == .exited(75))
        #expect(kept.isRunning, "exactly one daemon stays")
        let said = Self.log(w.path, "first.log") + Self.log(w.path, "second.log")
        #expect(said.contains("announced itself first"), "\(said)")
        print("[measured] after the restart the \(kept === first ? "first" : "second") daemon manages")
        try await Self.checkOneManagerDucks(audio, work: w.path, label: "after a restart")
        #expect(kept.isRunning)
    }

    /// Hole 13: `interlude session` and `interlude interrupt prompt` across an audio-server crash
    /// and restart. Both reopen their streams (same sessions; the music still ducked by the prompt),
    /// the prompt does not expire under A9 (its stream is back well inside the 10 s expiry), ends
    /// when its time is up, and a new prompt ducks the music again. Levels from the recording.
    @Test(.enabled(if: AudioServer.required()))
    func theReferenceAppReopensItsStreamAfterAnAudioServerRestart() async throws {
        let own = try await OwnAudioServer.start("e2e-session-restart")
        defer { own.stop() }
        let (audio, w, env) = (own.audio, own.work, own.environment)
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, config: false, environment: env)
        defer { daemon.stop() }
        func run(_ args: [String]) throws -> (ChildProcess, Output) { try Self.cli(w.socket, env, args) }
        let (music, musicOut) = try run(["session", "--app", "org.example.Music", "--category", "playback", "--tone", "440"])
        defer { Self.end(music) }
        var ears = try Ears(audio.server)
        defer { ears.stop() }
        func musicStream(_ pulse: PulseConnection) -> PulseSinkInput? {
            (try? pulse.sinkInputs())?.first { $0.applicationName == "org.example.Music" }
        }
        #expect(await Self.waitFor(5) { musicStream(ears.pulse) != nil })
        try await Task.sleep(for: .milliseconds(800))
        let before = await ears.median(440)
        #expect(abs(before) < 1, "music before: \(before) dB")
        let status0 = try await InterludeClient.connect(socket: w.socket, app: "org.interlude.CLI").status()
        let musicSession = status0.sessions.first { $0.app == "org.example.Music" }?.session

        let (prompt, promptOut) = try run(["interrupt", "prompt", "--for", "10"])
        defer { Self.end(prompt) }
        try await Task.sleep(for: .milliseconds(1200))
        let ducked = await ears.median(440)
        #expect(abs(ducked + 14) < 1.5, "music under the prompt: \(ducked) dB")

        // The server crashes and comes back.
        ears.stop()
        let killed = PulseClock.monotonicSeconds()
        try audio.kill()
        try await Task.sleep(for: .milliseconds(500))
        try await audio.start()
        let back = PulseClock.monotonicSeconds()
        ears = try Ears(audio.server)
        let reopened = await Self.waitFor(10) {
            let all = (try? ears.pulse.sinkInputs()) ?? []
            return all.contains { $0.applicationName == "org.example.Music" } && all.contains { $0.applicationName == "org.interlude.Prompt" }
        }
        let reopenedAt = PulseClock.monotonicSeconds()
        #expect(reopened, "the reference apps' streams did not come back")
        #expect(music.isRunning && prompt.isRunning)
        if reopened { print("[measured] streams back \(String(format: "%.2f", reopenedAt - killed)) s after the crash, "
              + "\(String(format: "%.2f", reopenedAt - back)) s after the server was back") }
        try await Task.sleep(for: .milliseconds(1000))
        let duckedAfter = await ears.median(440), promptHeard = await ears.median(1320)
        #expect(abs(duckedAfter + 14) < 1.5, "music after the restart, the prompt still on: \(duckedAfter) dB; daemon log:\n\(Self.log(w.path, "log"))")
        #expect(abs(promptHeard) < 1.5, "the prompt after the restart: \(promptHeard) dB")
        let status = try await InterludeClient.connect(socket: w.socket, app: "org.interlude.CLI").status()
        let musicNow = status.sessions.first { $0.app == "org.example.Music" }
        #expect(musicNow?.session == musicSession && musicNow?.state == .active, "\(status.sessions)")

        // The prompt ends when its 10 s are up (not expired under A9 meanwhile); the music comes back.
        #expect(await Self.waitFor(12) { !prompt.isRunning })
        #expect(prompt.exited == .exited(0))
        let promptText = promptOut.text()
        #expect(promptText.contains("\"streamReopened\"") && !promptText.contains("\"expired\""), "\(promptText)")
        try await Task.sleep(for: .milliseconds(1200))
        let restored = await ears.median(440)
        #expect(abs(restored) < 1, "music after the prompt: \(restored) dB")

        // A new prompt ducks the reopened stream.
        let (again, _) = try run(["interrupt", "prompt", "--for", "2"])
        defer { Self.end(again) }
        try await Task.sleep(for: .milliseconds(1300))
        let duckedAgain = await ears.median(440)
        #expect(abs(duckedAgain + 14) < 1.5, "music under a new prompt: \(duckedAgain) dB")
        #expect(await Self.waitFor(5) { !again.isRunning })
        music.signal(SIGTERM)
        #expect(await Self.waitFor(5) { !music.isRunning })
        #expect(music.exited == .exited(0))
        #expect(musicOut.text().contains("\"streamReopened\""))
        print("[measured] music: before \(String(format: "%.1f", before)), ducked \(String(format: "%.1f", ducked)), after the restart \(String(format: "%.1f", duckedAfter)), after the prompt \(String(format: "%.1f", restored)), new prompt \(String(format: "%.1f", duckedAgain)) dB")
    }

    /// Hole 13, interrupted: a session paused by a call when the server crashes reopens its stream
    /// paused (corked, silent at the output), and resumes when the call ends (`shouldResume`).
    @Test(.enabled(if: AudioServer.required()))
    func anInterruptedReferenceAppReopensItsStreamPaused() async throws {
        let own = try await OwnAudioServer.start("e2e-paused-restart")
        defer { own.stop() }
        let (audio, w, env) = (own.audio, own.work, own.environment)
        let daemon = try DaemonProcess(socket: w.socket, work: w.path, config: false, environment: env)
        defer { daemon.stop() }
        let (music, musicOut) = try Self.cli(w.socket, env, ["session", "--app", "org.example.Music", "--category", "playback", "--tone", "440"])
        defer { Self.end(music) }
        var ears = try Ears(audio.server)
        defer { ears.stop() }
        #expect(await Self.waitFor(5) { Self.stream(ears.pulse, "org.example.Music") != nil })
        try await Task.sleep(for: .milliseconds(800))
        let (call, _) = try Self.cli(w.socket, env, ["interrupt", "call", "--for", "8"])
        defer { Self.end(call) }
        try await Task.sleep(for: .milliseconds(1000))
        let paused = await ears.median(440)
        #expect(paused < -50, "music during the call: \(paused) dB")

        ears.stop()
        try audio.kill()
        try await Task.sleep(for: .milliseconds(500))
        try await audio.start()
        ears = try Ears(audio.server)
        #expect(await Self.waitFor(10) { Self.stream(ears.pulse, "org.example.Music") != nil && Self.stream(ears.pulse, "org.interlude.Call") != nil })
        try await Task.sleep(for: .milliseconds(800))
        let reopened = Self.stream(ears.pulse, "org.example.Music")
        #expect(reopened?.corked == true, "the reopened stream of an interrupted session must be paused: \(String(describing: reopened))")
        let pausedAfter = await ears.median(440), callHeard = await ears.median(990)
        #expect(pausedAfter < -50, "music during the call, after the restart: \(pausedAfter) dB")
        #expect(abs(callHeard) < 1.5, "the call after the restart: \(callHeard) dB")
        #expect(await Self.waitFor(10) { !call.isRunning })
        try await Task.sleep(for: .milliseconds(1200))
        let resumed = await ears.median(440)
        #expect(abs(resumed) < 1, "music after the call: \(resumed) dB")
        music.signal(SIGTERM)
        #expect(await Self.waitFor(5) { !music.isRunning })
        let out = musicOut.text()
        #expect(out.contains("\"streamReopened\"") && out.contains("\"shouldResume\":true"), "\(out)")
        print("[measured] interrupted across a restart: music \(String(format: "%.1f", paused)) dB during the call, \(String(format: "%.1f", pausedAfter)) dB after the restart, \(String(format: "%.1f", resumed)) dB after the call")
    }
}
