import Foundation
import InterludeClient
import InterludeMeasure
import InterludePolicy
import InterludePulse
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// An app that keeps its session across audio-server restarts, as a real player does: when the
/// server comes back it opens its stream again (tagged with its session, `interlude.session`).
/// It obeys interruptions (corks) unless `obeys` is false, which leaves the daemon to mute it (A8).
final class RestartingApp: @unchecked Sendable {
    let app: String
    let category: AudioCategory
    let mode: AudioMode
    let options: [AudioSessionOption]
    let frequency: Double
    let obeys: Bool
    let socket: String
    private let lock = NSLock()
    private var stream: PulsePlaybackStream?
    private var interrupted = false
    private(set) var client: InterludeClient?
    private(set) var session: AudioSessionID?
    private var events: Task<Void, Never>?

    init(socket: String, app: String, category: AudioCategory, mode: AudioMode = .default,
         options: [AudioSessionOption] = [], frequency: Double, obeys: Bool = true) {
        self.socket = socket; self.app = app; self.category = category; self.mode = mode; self.options = options
        self.frequency = frequency; self.obeys = obeys
    }

    func connect() async throws {
        let c = try await InterludeClient.connect(socket: socket, app: app)
        client = c
        session = try await c.register(category: category, mode: mode, options: options)
        let stream = c.events
        events = Task { [weak self] in
            for await e in stream { self?.handle(e) }
        }
    }

    private func handle(_ e: WireEvent) {
        switch e.event {
        case WireEventName.interruptionBegan:
            lock.withLock {
                interrupted = true
                if obeys { try? stream?.setCorked(true) }
            }
        case WireEventName.interruptionEnded:
            lock.withLock {
                interrupted = false
                if e.data["shouldResume"]?.boolValue ?? false { try? stream?.setCorked(false) }
            }
        default: break
        }
    }

    func activate() async throws {
        guard let c = client, let s = session else { return }
        _ = try await c.activate(s)
    }

    func deactivate() async throws {
        guard let c = client, let s = session else { return }
        try await c.deactivate(s, notifyOthers: true)
    }

    /// Opens (again) the app's stream on `pulse`; corked at once if it obeys an interruption.
    func openStream(on pulse: PulseConnection) throws {
        guard let s = session else { return }
        let st = try PulsePlaybackStream(connection: pulse, name: "\(app) \(s)", source: .sine(frequency: frequency, amplitude: 0.25),
                                         properties: ["interlude.session": s.rawValue, "application.name": app,
                                                      "interlude.daemon": socket,
                                                      "media.role": mode == .voicePrompt ? "navigation" : (mode.isCall ? "phone" : "music")])
        lock.withLock {
            stream = st
            if interrupted && obeys { try? st.setCorked(true) }
        }
    }

    /// Forgets the stream of a server that went away.
    func dropStream() { lock.withLock { stream?.close(); stream = nil } }

    func close() {
        dropStream()
        client?.close()
        events?.cancel()
    }
}

/// Row 1: the audio server is SIGKILLed and started again `restarts` times. For the first half a
/// navigation prompt (`duckOthers`) ducks music and a podcast (A2); for the second half a call
/// interrupts both (A4), the podcast ignoring it so that the daemon must mute it (A8). A call
/// interrupts every session, so the two states cannot be held at once (POLICY.md A4). After each
/// restart the apps open their streams again at once; one second later the recording of the
/// null sink's monitor must show the duck (−14 dB ± 2) or the silence (below −40 dB) again, and
/// `interlude play default` must be audible (the sample cache re-uploaded, S3). At the end every
/// stream must be back at its user volume (0 dB ± 1).
struct AudioRestartRow {
    let ctx: TortureContext

    static let sink = "interlude_out"
    /// The default sound's first note (C6), what "audible" listens for: `Sounds/default.wav`.
    static let chime = 1046.5

    func pulseServer(_ verb: String, _ dir: String) throws {
        try Spawn.run(["bash", ctx.root + "/Scripts/pulse-private", verb, dir])
    }

    func run() async -> TortureRow {
        let dir = ctx.work + "/restart"
        let pulseDir = dir + "/pulse"
        let server = "unix:\(pulseDir)/pa.sock"
        var problems: [String] = []
        var failedCycles = 0
        var worstSettle = 0.0
        var reapplied = (ducks: 0, calls: 0)
        var audible = 0
        var endLevels: [String] = []
        var daemon: DaemonProcess?
        var pulse: PulseConnection?
        var monitor: Monitor?
        var apps: [RestartingApp] = []
        defer {
            monitor?.stop()
            apps.forEach { $0.close() }
            pulse?.disconnect()
            daemon?.stop()
            try? pulseServer("stop", pulseDir)
        }
        do {
            try pulseServer("start", pulseDir)
            let config = try writeConfig(dir + "/config", "{ authorization: { default: \"grant\" } }")
            let d = DaemonProcess(bin: ctx.bin, folder: dir, config: config, pulseServer: server)
            daemon = d
            try await d.start()
            let socket = d.socket
            let music = RestartingApp(socket: socket, app: "org.interlude.torture.Music", category: .playback,
                                      options: [.mixWithOthers], frequency: 440)
            let podcast = RestartingApp(socket: socket, app: "org.interlude.torture.Podcast", category: .playback,
                                        mode: .spokenAudio, frequency: 550, obeys: false)
            let prompt = RestartingApp(socket: socket, app: "org.interlude.torture.Maps", category: .playback,
                                       mode: .voicePrompt, options: [.duckOthers], frequency: 1320)
            let call = RestartingApp(socket: socket, app: "org.interlude.torture.Phone", category: .playAndRecord,
                                     mode: .voiceChat, frequency: 770)
            apps = [music, podcast, prompt, call]
            for a in apps { try await a.connect() }

            func connectPulse() throws {
                let p = PulseConnection(server: server, clientName: "interlude-torture")
                try p.connect(timeout: 5)
                pulse = p
                monitor = try Monitor(pulse: p, source: Self.sink + ".monitor")
            }
            try connectPulse()
            try await music.activate(); try music.openStream(on: pulse!)
            try await podcast.activate(); try podcast.openStream(on: pulse!)
            try await prompt.activate(); try prompt.openStream(on: pulse!)
            await sleep(2)

            setenv("INTERLUDE_SOCKET", socket, 1)
            for cycle in 1...ctx.restarts {
                let ducking = cycle <= (ctx.restarts + 1) / 2
                if cycle == (ctx.restarts + 1) / 2 + 1 {
                    // Second half: the prompt ends, a call begins (A4), with the server up.
                    try await prompt.deactivate()
                    prompt.dropStream()
                    try await call.activate()
                    try call.openStream(on: pulse!)
                    await sleep(1.5)
                }
                guard d.checkAlive("before restart \(cycle)") else { break }
                // SIGKILL the server, then start it again on the same socket.
                let pid = (try? String(contentsOfFile: pulseDir + "/pulse.pid", encoding: .utf8))
                    .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                if let pid {
                    Glibc.kill(pid, SIGKILL)
                    // Gone, or a zombie nobody reaps (it is not our child): either way it is dead.
                    let t0 = now()
                    while now() - t0 < 2, let st = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                          !st.contains(") Z ") { await sleep(0.02) }
                }
                // A killed server leaves its pid file; the next one would take it for itself running.
                try? FileManager.default.removeItem(atPath: pulseDir + "/runtime/pid")
                monitor?.stop(); monitor = nil
                apps.forEach { $0.dropStream() }
                pulse?.disconnect(); pulse = nil
                await sleep(0.2)
                try pulseServer("start", pulseDir)
                try connectPulse()
                let live = ducking ? [music, podcast, prompt] : [music, podcast, call]
                for a in live { try a.openStream(on: pulse!) }
                let opened = now()

                // One second later: the duck or the interruption is back.
                let expected: [(RestartingApp, ClosedRange<Double>)] = ducking
                    ? [(music, -16 ... -12), (podcast, -16 ... -12), (prompt, -1.5 ... 1.5)]
                    : [(music, -200 ... -40), (podcast, -200 ... -40), (call, -1.5 ... 1.5)]
                var settled = 0.0
                var cycleOK = true
                var levelsOK = true
                for (app, range) in expected {
                    let levels = await monitor!.levels(app.frequency, from: opened, to: opened + 1.4, window: 0.04, hop: 0.02)
                    let late = levels.filter { $0.t >= opened + 1.0 }.map(\.db)
                    let level = Stats(late).median ?? -200
                    if !range.contains(level) {
                        cycleOK = false
                        levelsOK = false
                        problems.append("restart \(cycle): \(app.app) at \(db(level)) 1.0–1.4 s after its stream reopened (want \(db(range.lowerBound))…\(db(range.upperBound)))")
                    }
                    // Settle time: the first window after which every window stays in range.
                    if let lastOut = levels.lastIndex(where: { !range.contains($0.db) }) {
                        settled = max(settled, lastOut + 1 < levels.count ? levels[lastOut + 1].t - opened : 1.4)
                    }
                }
                if levelsOK {
                    worstSettle = max(worstSettle, settled)
                    if ducking { reapplied.ducks += 1 } else { reapplied.calls += 1 }
                }

                // The sample cache: `interlude play default`, heard at the output (C6 of the chime).
                let tPlay = now()
                let status = Spawn.wait(try Spawn.start([ctx.bin + "/interlude", "play", "default"]))
                let chime = await monitor!.levels(Self.chime, from: tPlay, to: tPlay + 1.0, window: 0.04, hop: 0.02).map(\.db).max() ?? -200
                if status == 0 && chime > -20 {
                    audible += 1
                } else {
                    cycleOK = false
                    problems.append("restart \(cycle): `interlude play default` exited \(status), chime at \(db(chime)) (want > −20 dB)")
                }
                if !cycleOK { failedCycles += 1 }
                await sleep(tPlay + 1.9 - now())  // the chime (1.2 s) ends and its duck (S4) ramps back
            }

            // The end: the call hangs up; every stream is back at its user volume.
            try await call.deactivate()
            call.dropStream()
            let t = now()
            await sleep(2.2)
            for app in [music, podcast] {
                let level = Stats(await monitor!.levels(app.frequency, from: t + 1.5, to: t + 2.0, window: 0.04, hop: 0.02).map(\.db)).median ?? -200
                endLevels.append("\(app.app.split(separator: ".").last!) \(db(level))")
                if abs(level) > 1 {
                    failedCycles += 1
                    problems.append("at the end \(app.app) at \(db(level)), not at its user volume (0 dB ± 1)")
                }
            }
        } catch {
            problems.append("stopped: \(error)")
        }
        daemon?.stop()
        let crashes = daemon?.crashes ?? []
        problems += crashes
        return TortureRow(
            name: "audio server SIGKILLed and restarted",
            tried: "\(ctx.restarts) restarts (\((ctx.restarts + 1) / 2) during a prompt's duck, \(ctx.restarts / 2) during a call)",
            failed: failedCycles,
            figures: "back within 1 s of the streams reopening: the duck \(reapplied.ducks)/\((ctx.restarts + 1) / 2), the call's "
                + "interruption \(reapplied.calls)/\(ctx.restarts / 2) (those settled ≤ \(ms(worstSettle))); "
                + "`interlude play` audible \(audible)/\(ctx.restarts); end: \(endLevels.joined(separator: ", ")); "
                + "daemon crashes \(crashes.count)",
            problems: problems)
    }
}
