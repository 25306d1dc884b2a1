import Foundation
import Testing
import InterludeClient
import InterludePulse
import InterludeScenario
import InterludeTestSupport
import InterludeWire
import InterludePolicy

/// MPRIS players end to end (issue 10): the real `interluded` on a private bus and the test's
/// PulseAudio, real `mpv` with mpv-mpris playing a tone, `playerctl` acting as the user, the real
/// `interlude interrupt call`, and the tone measured at the null sink's monitor. Skips without mpv,
/// mpv-mpris, playerctl or dbus-daemon outside CI; under CI=true a missing tool is a failure.
@Suite(.serialized) struct MprisEndToEndTests {
    static let mprisPlugin = ["/usr/lib/mpv-mpris/mpris.so", "/etc/mpv/scripts/mpris.so"].first { FileManager.default.fileExists(atPath: $0) }

    /// Whether every tool is there; under CI a missing one is recorded as a failure.
    static func required() -> Bool {
        guard AudioServer.required() else { return false }
        var missing: [String] = []
        if !PrivateBus.available { missing.append("dbus-daemon") }
        if !FileManager.default.isExecutableFile(atPath: "/usr/bin/mpv") { missing.append("mpv") }
        if mprisPlugin == nil { missing.append("mpv-mpris") }
        if !FileManager.default.isExecutableFile(atPath: "/usr/bin/playerctl") { missing.append("playerctl") }
        if !FakeMprisPlayer.available { missing.append("python3-dbus/python3-gi") }
        if !missing.isEmpty, ProcessInfo.processInfo.environment["CI"] == "true" {
            Issue.record("missing \(missing.joined(separator: ", ")): the MPRIS end-to-end tests may not skip under CI (Scripts/test installs them)")
        }
        return missing.isEmpty
    }

    /// Lines a child prints, each with the monotonic time it arrived (PulseClock, as the recorder's).
    final class Lines: @unchecked Sendable {
        private let lock = NSLock()
        private var pending = ""
        private var lines: [(t: Double, text: String)] = []
        init(_ h: FileHandle) {
            h.readabilityHandler = { [self] h in
                let d = h.availableData
                let t = PulseClock.monotonicSeconds()
                if d.isEmpty { h.readabilityHandler = nil; return }
                lock.withLock {
                    pending += String(decoding: d, as: UTF8.self)
                    while let nl = pending.firstIndex(of: "\n") {
                        lines.append((t, String(pending[..<nl])))
                        pending = String(pending[pending.index(after: nl)...])
                    }
                }
            }
        }
        var all: [(t: Double, text: String)] { lock.withLock { lines } }
        /// The arrival time of the first line after `after` that satisfies `match`, waiting up to `timeout` s.
        func first(after: Double = 0, timeout: Double, _ match: @escaping (String) -> Bool) async -> Double? {
            let end = PulseClock.monotonicSeconds() + timeout
            while PulseClock.monotonicSeconds() < end {
                if let l = all.first(where: { $0.t >= after && match($0.text) }) { return l.t }
                try? await Task.sleep(nanoseconds: 2_000_000)
            }
            return nil
        }
    }

    /// A child process with its stdout read line by line.
    final class Child {
        let process = Process()
        let out: Lines
        /// Where its stderr goes, if a file.
        let stderrPath: String?
        /// For a failure message: whether it runs, and the end of its stderr.
        var diagnosis: String {
            let tail = stderrPath.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) }.map { String($0.suffix(2000)) } ?? ""
            return "pid \(pid) " + (process.isRunning ? "running" : "exited with status \(process.terminationStatus)")
                + (tail.isEmpty ? ", nothing on stderr" : ", its stderr:\n\(tail)")
        }
        init(_ path: String, _ args: [String], env: [String: String], stderr: String? = nil) throws {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = args
            process.environment = env
            stderrPath = stderr
            let pipe = Pipe()
            process.standardOutput = pipe
            if let stderr {
                _ = FileManager.default.createFile(atPath: stderr, contents: nil)
                process.standardError = FileHandle(forWritingAtPath: stderr)
            } else { process.standardError = FileHandle.nullDevice }
            out = Lines(pipe.fileHandleForReading)
            try process.run()
        }
        func stop() {
            // SIGKILL: mpv with mpv-mpris does not always end on SIGTERM (seen: a test waited for ever).
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        var pid: Int32 { process.processIdentifier }
    }

    /// One test's world: a private bus, a daemon on it (managing only streams marked for it), a
    /// recorder on the sink's monitor, and the tones.
    final class World {
        let bus: PrivateBus
        let work: WorkFolder
        let daemon: DaemonProcess
        let pulse = PulseConnection(clientName: "interlude e2e mpris")
        let recorder: PulseRecorder
        var children: [Child] = []
        /// The environment of the players: the private bus, and `interlude.daemon` on their streams
        /// (PULSE_PROP) so that the private daemon manages them.
        var env: [String: String] {
            var e = bus.environment
            e["PULSE_PROP"] = "interlude.daemon=\(work.socket)"
            return e
        }

        /// Starts the world's parts in order; if one cannot start (the audio server gone, say),
        /// the ones started before it are stopped before the error is thrown: a private bus and a
        /// daemon left running outlived the test run (seen when `pipewire-pulse` died mid-run).
        init(_ name: String, config: String? = nil) async throws {
            let bus = try PrivateBus("mpris-\(name)")
            var undo: [() -> Void] = [bus.stop]
            do {
                let work = try WorkFolder("mpris-\(name)")
                undo.append(work.remove)
                if let config { try work.config(config) }
                let daemon = try DaemonProcess(socket: work.socket, work: work.path, config: config != nil, environment: bus.environment, bus: true)
                undo.append(daemon.stop)
                try pulse.connect()
                undo.append(pulse.disconnect)
                recorder = try PulseRecorder(connection: pulse, source: try pulse.defaultSinkName() + ".monitor")
                self.bus = bus
                self.work = work
                self.daemon = daemon
            } catch {
                for u in undo.reversed() { u() }
                throw error
            }
        }

        func stop() {
            for c in children { c.stop() }
            recorder.stop()
            pulse.disconnect()
            daemon.stop()
            bus.stop()
            work.remove()
        }

        /// A WAV tone of `hz` (amplitude 0.25, 60 s) in the work folder.
        func tone(_ hz: Double) throws -> String {
            let file = work.path + "/tone-\(Int(hz)).wav"
            if !FileManager.default.fileExists(atPath: file) {
                try WAVFile.writeSine(path: file, frequency: hz, amplitude: 0.25, seconds: 60, sampleRate: 48000)
            }
            return file
        }

        /// Starts `mpv --no-video --ao=pulse --loop-file=inf` with mpv-mpris on a tone.
        @discardableResult
        func mpv(_ hz: Double) throws -> Child {
            let c = try Child("/usr/bin/mpv", ["--no-config", "--script=\(MprisEndToEndTests.mprisPlugin!)", "--no-video", "--ao=pulse",
                                               "--loop-file=inf", "--no-terminal", try tone(hz)],
                              env: env, stderr: work.path + "/mpv-\(Int(hz)).log")
            children.append(c)
            return c
        }

        /// The fake MPRIS player (python3-dbus): plays the tone through paplay with its own pid
        /// as `application.process.id`; `canPause` false, or ignoring `Pause`.
        @discardableResult
        func fake(_ name: String, hz: Double, canPause: Bool, obeys: Bool) throws -> Child {
            let script = try FakeMprisPlayer.write(into: work.path)
            let c = try Child(FakeMprisPlayer.python, [script, name, canPause ? "1" : "0", obeys ? "1" : "0", try tone(hz), work.socket],
                              env: bus.environment, stderr: work.path + "/fake-\(name).log")
            children.append(c)
            return c
        }

        func status() throws -> StatusResult {
            try InterludeClient.request(socket: work.socket, app: "org.interlude.CLI", WireMethod.status, StatusParams(), as: StatusResult.self)
        }
        func player(_ busName: String) -> PlayerStatus? { (try? status())?.players?.first { $0.player == busName } }
        /// Waits until the daemon shows the player with `status` and at least one matched stream.
        func waitForPlayer(_ busName: String, status wanted: String = "Playing", timeout: Double = 10) async -> PlayerStatus? {
            let end = PulseClock.monotonicSeconds() + timeout
            while PulseClock.monotonicSeconds() < end {
                if let s = try? status(), let p = s.players?.first(where: { $0.player == busName }), p.status == wanted,
                   s.sessions.first(where: { $0.session == p.session })?.streams.isEmpty == false { return p }
                try? await Task.sleep(nanoseconds: 50_000_000)
            }
            return nil
        }
        /// The bus name of the player owned by `pid`.
        func busName(ofPid pid: Int32, timeout: Double = 20) async -> String? {
            let end = PulseClock.monotonicSeconds() + timeout
            while PulseClock.monotonicSeconds() < end {
                if let p = (try? status())?.players?.first(where: { $0.pid == pid }) { return p.player }
                try? await Task.sleep(nanoseconds: 50_000_000)
            }
            return nil
        }

        /// `playerctl -p NAME ARGS…` as the user (off the test's thread pool).
        @discardableResult
        func playerctl(_ name: String, _ args: [String]) async throws -> String {
            let short = name.replacingOccurrences(of: "org.mpris.MediaPlayer2.", with: "")
            return try await bus.exec("/usr/bin/playerctl", ["-p", short] + args, timeout: 5)
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        /// `playerctl --follow status`: each PlaybackStatus change, timestamped when it arrives.
        func follow(_ name: String) throws -> Child {
            let short = name.replacingOccurrences(of: "org.mpris.MediaPlayer2.", with: "")
            let c = try Child("/usr/bin/playerctl", ["-p", short, "--follow", "status"], env: bus.environment)
            children.append(c)
            return c
        }
        /// `interlude interrupt call --for SECONDS` (the CLI execs interlude-audio).
        func call(seconds: Double, tone: Int = 990) throws -> Child {
            guard let cli = ScenarioRunner.siblingExecutable("interlude") else { throw CocoaError(.fileNoSuchFile) }
            let c = try Child(cli, ["--socket", work.socket, "interrupt", "call", "--for", String(seconds), "--tone", String(tone)],
                              env: bus.environment, stderr: work.path + "/call.log")
            children.append(c)
            return c
        }

        /// The level of `hz` at the monitor at monotonic time `t` (dB re 0.25 amplitude; median over 0.1 s).
        func level(_ hz: Double, at t: Double) -> Double {
            ToneAnalysis.level(samples: recorder.samples(), sampleRate: 48000, frequency: hz, at: t - recorder.startTime)
        }
        var log: String { (try? String(contentsOfFile: work.path + "/log", encoding: .utf8)) ?? "" }
    }

    static let heard = -12.0   // dB: the tone is playing (it is recorded at about 0 dB)
    static let silent = -45.0  // dB: the tone is not heard

    // MARK: A4 + A5: paused by a call, resumed at the same place

    @Test(.enabled(if: required(), "needs mpv, mpv-mpris, playerctl, python3-gi, dbus-daemon and a PulseAudio server (Scripts/test installs them)"))
    func A4_A5_aCallPausesMpvPromptlySilentAndResumesAudibleWithin300msWhereItStopped() async throws {
        let w = try await World("call")
        defer { w.stop() }
        let mpv = try w.mpv(440)
        guard let name = await w.busName(ofPid: mpv.pid), let before = await w.waitForPlayer(name) else {
            // Seen once in a clean-clone CI's PipeWire pass at a high load: no word of mpv in the
            // daemon's log within 10 s (now 20 s); mpv's own state says whether it had started.
            Issue.record("the daemon never showed mpv playing with a matched stream:\n\(w.log)\nmpv: \(mpv.diagnosis)"); return
        }
        #expect(before.canPause && before.action == "none")
        // One app, one session (A10): mpv's stream is in its player session, not in one of its own.
        let sessions = try w.status().sessions
        #expect(sessions.filter { $0.streams.contains { $0.pid == mpv.pid } }.map(\.session) == [before.session], "\(sessions)")
        try await Task.sleep(nanoseconds: 700_000_000)
        let follow = try w.follow(name)
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(w.level(440, at: PulseClock.monotonicSeconds() - 0.2) > Self.heard, "mpv's tone is heard before the call")

        let launched = PulseClock.monotonicSeconds()
        let call = try w.call(seconds: 3)
        guard let activated = await call.out.first(timeout: 10, { $0.contains("\"activate\"") }),
              let paused = await follow.out.first(after: launched, timeout: 5, { $0 == "Paused" }) else {
            Issue.record("no activation or no Paused: \(call.out.all) \(follow.out.all)\n\(w.log)"); return
        }
        // The activation happens between the launch and its reply line; Paused must follow it. The
        // 100 ms aim is printed below (the demo shows it too): measured here it also holds two
        // other processes' pipes (the CLI's reply line, playerctl's Paused line), and a clean-clone
        // CI on two busy cores read 100.6 ms once. The bound tells "paused by the call" from "not".
        #expect(paused - activated <= 0.25, "Paused \(Int((paused - activated) * 1000)) ms after the activate reply arrived")
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let positionPaused = Double(try await w.playerctl(name, ["position"])) ?? -1
        #expect(w.player(name)?.status == "Paused" && w.player(name)?.action == "paused" && w.player(name)?.rule == "A4")
        guard let ended = await call.out.first(timeout: 10, { $0.contains("\"deactivated\"") }),
              let playing = await follow.out.first(after: paused, timeout: 5, { $0 == "Playing" }) else {
            Issue.record("the call did not end or mpv did not play again: \(follow.out.all)\n\(w.log)"); return
        }
        let positionAfter = Double(try await w.playerctl(name, ["position"])) ?? -1
        let readAt = PulseClock.monotonicSeconds()
        #expect(playing - ended <= 0.3, "Playing \(Int((playing - ended) * 1000)) ms after the call's end")
        try await Task.sleep(nanoseconds: 800_000_000)
        // Silent from 100 ms after Paused until the call ends; audible again 300 ms after it ends.
        var worst = -200.0
        var t = paused + 0.1
        while t < ended - 0.05 { worst = max(worst, w.level(440, at: t)); t += 0.1 }
        #expect(worst < Self.silent, "the tone during the call: loudest \(worst) dB")
        let back = w.level(440, at: ended + 0.3 + 0.05)
        #expect(back > Self.heard, "the tone 300 ms after the call: \(back) dB")
        // Where it stopped: the position after the call is the paused one plus the time it has played since.
        let playedSince = readAt - playing
        #expect(positionPaused > 0 && abs(positionAfter - positionPaused - playedSince) < 0.35,
                "paused at \(positionPaused) s, \(positionAfter) s read \(playedSince) s after it played again")
        #expect(w.player(name)?.action == "resumed" && w.player(name)?.rule == "A5")
        #expect(w.log.contains("Pause: Playing and can pause, interrupted by a call [A4]"), "\(w.log)")
        #expect(w.log.contains("Play: Interlude paused it, still Paused, untouched by its user [A5]"), "\(w.log)")
        print("mpris e2e: Paused \(Int((paused - activated) * 1000)) ms after the activate reply (\(Int((paused - launched) * 1000)) ms after launching the CLI); "
              + "Playing \(Int((playing - ended) * 1000)) ms after the call ended; silent at \(worst) dB, back at \(back) dB; "
              + "position \(positionPaused) → \(positionAfter) s; daemon: "
              + w.log.split(separator: "\n").filter { $0.contains("answered in") }.map { $0.replacingOccurrences(of: "interluded: ", with: "") }
                .joined(separator: "; "))
    }

    // MARK: A5 at the daemon's stop

    /// The daemon stopped (SIGTERM, as `systemctl --user restart` does) while a call holds mpv
    /// paused: mpv plays again, no pause of Interlude's outlives it (a stranger's mpv stayed
    /// paused for good: the `Play` went out after the bus connection had closed). The call is
    /// `interlude interrupt call` on the socket (its session ends as the stop closes the
    /// connections), or a `media.role=phone` stream of paplay's (an implicit call, A10, still
    /// going on when the daemon ends: ``AudioPolicy/a5ResumePlayersAtStop(_:)``).
    @Test(.enabled(if: required(), "needs mpv, mpv-mpris, playerctl, python3-gi, dbus-daemon and a PulseAudio server (Scripts/test installs them)"),
          arguments: ["socket", "stream"])
    func A5_theDaemonsStopDuringACallResumesMpv(call kind: String) async throws {
        let w = try await World("stop-\(kind)")
        defer { w.stop() }
        let mpv = try w.mpv(440)
        guard let name = await w.busName(ofPid: mpv.pid), await w.waitForPlayer(name) != nil else {
            Issue.record("no player:\n\(w.log)\nmpv: \(mpv.diagnosis)"); return
        }
        let follow = try w.follow(name)
        try await Task.sleep(nanoseconds: 300_000_000)
        let start = PulseClock.monotonicSeconds()
        if kind == "socket" {
            _ = try w.call(seconds: 60)
        } else {
            var env = w.env
            env["PULSE_PROP"] = "interlude.daemon=\(w.work.socket) media.role=phone"
            w.children.append(try Child("/usr/bin/paplay", [try w.tone(990)], env: env, stderr: w.work.path + "/phone.log"))
        }
        guard let paused = await follow.out.first(after: start, timeout: 10, { $0 == "Paused" }) else {
            Issue.record("the call did not pause mpv: \(follow.out.all)\n\(w.log)"); return
        }
        try await Task.sleep(nanoseconds: 500_000_000)
        let exit = w.daemon.terminate()
        #expect(exit == .exited(0), "\(String(describing: exit))")
        let playing = await follow.out.first(after: paused, timeout: 5, { $0 == "Playing" })
        #expect(playing != nil, "mpv still \(follow.out.all.last?.text ?? "?") after the daemon stopped:\n\(w.log)")
        #expect(!w.log.contains("Play failed"), "\(w.log)")
        if kind == "stream" {
            #expect(w.log.contains("stopping: resuming 1 player(s) Interlude paused [A5]"), "\(w.log)")
            // Started again while the call stream plays: mpv's stream is found before mpv on the
            // bus, interrupted by the call; mpv takes its place and is paused again (A10, A4; a
            // stranger's mpv played on under the call at −14 dB), and plays when the call ends.
            guard let resumedAt = playing else { return }
            let again = try DaemonProcess(socket: w.work.socket, work: w.work.path, config: false, environment: w.bus.environment, bus: true)
            defer { again.stop() }
            let pausedAgain = await follow.out.first(after: resumedAt, timeout: 10, { $0 == "Paused" })
            #expect(pausedAgain != nil, "mpv not paused by the daemon started again during the call: \(follow.out.all)\n\(w.log)")
            #expect(w.log.contains("the player takes its place and its interruption [A10]"), "\(w.log)")
            guard let pausedAgain, let phone = w.children.last else { return }
            phone.stop()  // the call ends
            let after = await follow.out.first(after: pausedAgain, timeout: 5, { $0 == "Playing" })
            #expect(after != nil, "mpv not resumed after the call: \(follow.out.all)\n\(w.log)")
        }
    }

    // MARK: A5: the user's own pause and resume

    @Test(.enabled(if: required(), "needs mpv, mpv-mpris, playerctl, python3-gi, dbus-daemon and a PulseAudio server (Scripts/test installs them)"))
    func A5_pausedByTheUserBeforeStaysPaused_resumedByTheUserDuringIsNotTouchedAgain() async throws {
        let w = try await World("user")
        defer { w.stop() }
        let mpv = try w.mpv(440)
        guard let name = await w.busName(ofPid: mpv.pid), await w.waitForPlayer(name) != nil else {
            Issue.record("no player:\n\(w.log)\nmpv: \(mpv.diagnosis)"); return
        }
        // Paused by the user before the call: stays paused after it.
        try await w.playerctl(name, ["pause"])
        #expect(await w.waitForPlayer(name, status: "Paused") != nil)
        let first = try w.call(seconds: 1.5)
        _ = await first.out.first(timeout: 10, { $0.contains("\"deactivated\"") })
        try await Task.sleep(nanoseconds: 800_000_000)
        #expect(try await w.playerctl(name, ["status"]) == "Paused", "the user's pause holds after the call")
        #expect(w.player(name)?.action == "leftAlonePausedBefore" && w.player(name)?.rule == "A5", "\(String(describing: w.player(name)))")
        #expect(w.log.contains("left alone: it was Paused, not playing, when interrupted"), "\(w.log)")

        // Resumed by the user during the call: Interlude neither pauses, mutes nor resumes it again.
        try await w.playerctl(name, ["play"])
        #expect(await w.waitForPlayer(name) != nil)
        let follow = try w.follow(name)
        try await Task.sleep(nanoseconds: 300_000_000)
        let start = PulseClock.monotonicSeconds()
        let second = try w.call(seconds: 3)
        guard let paused = await follow.out.first(after: start, timeout: 5, { $0 == "Paused" }) else {
            Issue.record("the call did not pause mpv: \(follow.out.all)\n\(w.log)"); return
        }
        try await Task.sleep(nanoseconds: 500_000_000)
        try await w.playerctl(name, ["play"])
        let resumedByUser = PulseClock.monotonicSeconds()
        guard let ended = await second.out.first(timeout: 10, { $0.contains("\"deactivated\"") }) else {
            Issue.record("the call did not end"); return
        }
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let changes = follow.out.all.filter { $0.t > paused }.map(\.text)
        #expect(changes == ["Playing"], "after Interlude's pause only the user's play: \(changes)")
        #expect(w.level(440, at: resumedByUser + 0.8) > Self.heard, "not muted after the user resumed it during the call (A5)")
        #expect(w.level(440, at: ended + 0.5) > Self.heard)
        #expect(w.player(name)?.action == "leftAloneUserTouched", "\(String(describing: w.player(name)))")
        #expect(w.log.contains("by its user during the interruption: left alone"), "\(w.log)")
        #expect(!w.log.contains("muted: player"), "\(w.log)")
    }

    // MARK: A8: a player that cannot pause, or ignores Pause, is muted

    @Test(.enabled(if: required(), "needs mpv, mpv-mpris, playerctl, python3-gi, dbus-daemon and a PulseAudio server (Scripts/test installs them)"),
          arguments: [(false, true), (true, false)])
    func A8_aPlayerThatCannotPauseOrIgnoresPauseIsMuted(canPause: Bool, obeys: Bool) async throws {
        let w = try await World(canPause ? "ignores" : "cannotpause")
        defer { w.stop() }
        // A tone of its own per case: the cases share the audio server's monitor.
        let hz: Double = canPause ? 770 : 660
        let fake = try w.fake("fake", hz: hz, canPause: canPause, obeys: obeys)
        guard let name = await w.busName(ofPid: fake.pid), await w.waitForPlayer(name) != nil else {
            Issue.record("no fake player:\n\(w.log)"); return
        }
        try await Task.sleep(nanoseconds: 700_000_000)
        #expect(w.level(hz, at: PulseClock.monotonicSeconds() - 0.2) > Self.heard, "the fake player is heard")
        let call = try w.call(seconds: 2.5)
        guard let activated = await call.out.first(timeout: 10, { $0.contains("\"activate\"") }),
              let ended = await call.out.first(timeout: 10, { $0.contains("\"deactivated\"") }) else {
            Issue.record("the call did not run:\n\(w.log)"); return
        }
        try await Task.sleep(nanoseconds: 1_200_000_000)
        // Cannot pause: muted at once. Ignores Pause: muted after the 500 ms grace period.
        // (+0.3 s: the grace timer and the mute run late on a loaded machine.)
        let mutedFrom = activated + (canPause ? 0.5 : 0) + 0.3
        var worst = -200.0
        var t = mutedFrom
        while t < ended - 0.05 { worst = max(worst, w.level(hz, at: t)); t += 0.1 }
        #expect(worst < Self.silent, "muted during the call from \(mutedFrom - activated) s: loudest \(worst) dB\n\(w.log)")
        #expect(w.level(hz, at: ended + 0.8) > Self.heard, "unmuted after the call")
        let expected = canPause ? "did not obey Pause within the grace period" : "cannot pause (CanPause false), muted instead of paused"
        #expect(w.log.contains(expected) && w.log.contains("[A8]"), "\(w.log)")
        #expect(w.log.contains("Pause: Playing and can pause") == canPause, "Pause is sent only to one that says it can pause")
        #expect(w.player(name)?.action == "muted" && w.player(name)?.rule == "A8")
    }

    // MARK: A4, A5: two players and a registered session in one call

    @Test(.enabled(if: required(), "needs mpv, mpv-mpris, playerctl, python3-gi, dbus-daemon and a PulseAudio server (Scripts/test installs them)"))
    func A4_A5_twoPlayersAndARegisteredSessionEachResumeByTheirOwnRule() async throws {
        let w = try await World("two")
        defer { w.stop() }
        let one = try w.mpv(440)
        let two = try w.mpv(550)
        guard let n1 = await w.busName(ofPid: one.pid), let n2 = await w.busName(ofPid: two.pid),
              await w.waitForPlayer(n1) != nil, await w.waitForPlayer(n2) != nil else {
            Issue.record("no two players:\n\(w.log)\nmpv 440 Hz: \(one.diagnosis)\nmpv 550 Hz: \(two.diagnosis)"); return
        }
        try await w.playerctl(n2, ["pause"])  // the user paused the second one before the call
        #expect(await w.waitForPlayer(n2, status: "Paused") != nil)
        let app = try await InterludeClient.connect(socket: w.work.socket, app: "org.example.Music")
        defer { app.close() }
        let s = try await app.register(category: .playback)
        _ = try await app.activate(s)
        try await app.setPlaying(s, true)
        let events = Task { () -> [WireEvent] in
            var seen: [WireEvent] = []
            for await e in app.events {
                seen.append(e)
                if e.event == WireEventName.interruptionEnded { break }
            }
            return seen
        }
        let call = try w.call(seconds: 2)
        _ = await call.out.first(timeout: 10, { $0.contains("\"deactivated\"") })
        try await Task.sleep(nanoseconds: 800_000_000)
        #expect(try await w.playerctl(n1, ["status"]) == "Playing", "the playing player is resumed (A5)")
        #expect(try await w.playerctl(n2, ["status"]) == "Paused", "the user-paused player stays paused (A5)")
        #expect(w.player(n1)?.action == "resumed" && w.player(n2)?.action == "leftAlonePausedBefore")
        events.cancel()
        let seen = await events.value
        let ended = seen.first { $0.event == WireEventName.interruptionEnded }
        #expect(ended.map { "\($0.data)".contains("true") } == true, "the registered session: interruptionEnded shouldResume true: \(seen)")
        #expect(seen.contains { $0.event == WireEventName.interruptionBegan })
        #expect(w.level(440, at: PulseClock.monotonicSeconds() - 0.3) > Self.heard)
        #expect(w.level(550, at: PulseClock.monotonicSeconds() - 0.3) < Self.silent)
    }
}
