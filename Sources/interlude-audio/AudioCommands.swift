import Dispatch
import Foundation
import InterludeClient
import InterludeCommandLine
import InterludePolicy
import InterludePulse
import InterludeScenario
import InterludeSound
import InterludeWire

/// `interlude-audio`: the `interlude` commands that play audio of their own through PulseAudio:
/// the reference apps (`session`, `interrupt`), `scenario run` and `demo`. `interlude` hands
/// these commands here with the same arguments (`CLI.handOff` in the `interlude` target), so
/// that the client-only commands start without loading libpulse and libsndfile.
enum AudioCLI {
    static let usage = """
    usage: interlude [--socket PATH] COMMAND [OPTIONS]   (the audio commands; `interlude help` lists all)

      session --app ID --category C [--mode M] [--option O]... (--tone HZ | --file PATH)
              [--for SECONDS] [--accepts-delay] [--ignore-interruptions]
      interrupt call|prompt --for SECONDS [--tone HZ]
      scenario run FILE [--record FILE.wav] [--plot FILE.svg] [--connect] [--verbose]
      demo
    """


    static func run(_ argv: [String]) async -> Int32 {
        let line = CommandInvocation(argv)
        if let problem = line.usageProblem { return CommandOutput.fail(problem, code: 2) }
        guard let command = line.command else { CommandOutput.write(Data((usage + "\n").utf8), to: STDERR_FILENO); return 2 }
        let (socket, rest) = (line.socket, line.rest)
        do {
            switch command {
            case "session": return try await session(socket: socket, rest)
            case "interrupt": return try await interrupt(socket: socket, rest)
            case "demo": return try await Demo.run(socket: socket, rest)
            case "scenario": return try await scenario(socket: socket, rest)
            case "help", "--help", "-h": print(usage); return 0
            default: return CommandOutput.fail("unknown command \(CommandOutput.text(command))\n\(usage)", code: 2)
            }
        } catch {
            return CommandOutput.fail(error)
        }
    }

    struct AudioUnreachable: Error, CustomStringConvertible { var description: String }

    /// Connects to the PulseAudio server the reference apps play through, with an error that says so.
    static func connectAudio(_ pulse: PulseConnection) throws {
        do { try pulse.connect(timeout: 5) } catch {
            let server = ProcessInfo.processInfo.environment["PULSE_SERVER"].map { "PULSE_SERVER=\($0)" } ?? "the default server"
            throw AudioUnreachable(description: "cannot reach the PulseAudio server (\(server)): \(error)")
        }
    }

    // MARK: scenario

    static func scenario(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: ["connect", "verbose"], options: ["record", "plot"])
        guard a.positionals.count == 2, a.positionals[0] == "run" else {
            throw Arguments.UsageError(description: "usage: interlude scenario run FILE [--record FILE.wav] [--plot FILE.svg] [--connect]")
        }
        let file = a.positionals[1]
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file, isDirectory: &isDir), !isDir.boolValue else {
            return CommandOutput.fail("cannot read \(file): no such file", code: 2)
        }
        let text: String
        do { text = try String(contentsOfFile: file, encoding: .utf8) } catch { return CommandOutput.fail("cannot read \(file): not a UTF-8 text file", code: 2) }
        for out in [a.value("record"), a.value("plot")].compactMap({ $0 }) {
            let dir = (URL(fileURLWithPath: out).deletingLastPathComponent().path)
            guard FileManager.default.isWritableFile(atPath: dir) else { return CommandOutput.fail("cannot write \(out): \(dir) is not a writable folder", code: 2) }
        }
        let s: Scenario
        do { s = try Scenario.parse(text, file: file) } catch { return CommandOutput.fail("bad scenario: \(error)", code: 2) }
        let verbose = a.has("verbose")
        let connect = a.has("connect") ? (socket ?? InterludeClient.defaultSocketPath(environment: ProcessInfo.processInfo.environment)) : nil
        if connect != nil && s.config != nil {
            CommandOutput.write(Data("interlude: warning: --connect: the scenario's config does not apply to the running daemon, and its steps change that daemon's focus and ringer\n".utf8), to: STDERR_FILENO)
        }
        print("scenario: \(CommandOutput.terminalLines(s.name))")
        let report = try await ScenarioRunner(s, options: .init(connectSocket: connect, log: { if verbose { print(CommandOutput.terminalLines($0)) } },
                                                                warn: { CommandOutput.warn($0) })).run()
        for o in report.outcomes { print("\(o.held ? "held  " : "FAILED") line \(o.line): \(CommandOutput.terminalLines(o.text))") }
        if let path = a.value("record") {
            try WAVFile.write(path: path, samples: report.recording, sampleRate: report.sampleRate)
            print("recording: \(CommandOutput.terminalLines(path)) (starts at \(String(format: "%.3f", report.recordingStart)) s of scenario time)")
        }
        if let path = a.value("plot") {
            try ScenarioPlot.svg(s, report).write(toFile: path, atomically: true, encoding: .utf8)
            print("plot: \(CommandOutput.terminalLines(path))")
        }
        if verbose { print("daemon log:\n" + CommandOutput.terminalLines(report.daemonLog)) }
        let failed = report.outcomes.filter { !$0.held }.count
        print("\(report.outcomes.count - failed) passed, \(failed) failed")
        return failed == 0 ? 0 : 1
    }

    // MARK: session, interrupt

    static func session(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: ["accepts-delay", "ignore-interruptions"], options: ["app", "category", "mode", "option", "tone", "file", "for"], repeatable: ["option"])
        guard let app = a.value("app") else { throw Arguments.UsageError(description: "session needs --app ID") }
        guard let cat = a.value("category") else { throw Arguments.UsageError(description: "session needs --category") }
        guard let category = AudioCategory(rawValue: cat) else {
            throw Arguments.UsageError(description: "unknown category \(CommandOutput.text(cat)) (one of \(AudioCategory.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        let modeName = a.value("mode") ?? "default"
        guard let mode = AudioMode(rawValue: modeName) else {
            throw Arguments.UsageError(description: "unknown mode \(CommandOutput.text(modeName)) (one of \(AudioMode.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        let options = try a.all("option").map { o -> AudioSessionOption in
            guard let v = AudioSessionOption(rawValue: o) else {
                throw Arguments.UsageError(description: "unknown option \(CommandOutput.text(o)) (one of \(AudioSessionOption.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            return v
        }
        if let why = AppIdentifier.problem(app) { throw Arguments.UsageError(description: "--app: \(why)") }
        if let why = AudioSessionDescriptor(app: app, category: category, mode: mode, options: Set(options)).configurationProblem {
            throw Arguments.UsageError(description: why)
        }
        let source = try sourceArgument(a, defaultTone: nil)
        return try await runReferenceApp(socket: socket, app: app, category: category, mode: mode, options: options,
                                         source: source, seconds: try a.double("for", in: 0.001...86400),
                                         acceptsDelay: a.has("accepts-delay"), obeys: !a.has("ignore-interruptions"))
    }

    static func sourceArgument(_ a: Arguments, defaultTone: Double?) throws -> PulsePlaybackStream.Source {
        if a.has("file") && a.has("tone") { throw Arguments.UsageError(description: "give --tone HZ or --file PATH, not both") }
        if let path = a.value("file") {
            let sound: DecodedSound
            do { sound = try SoundDecoder.decode(path: path, maxDuration: 3600, maxBytes: 1 << 30) } catch {
                throw Arguments.UsageError(description: "cannot play \(CommandOutput.text(path)): \(error)")
            }
            return .pcm(samples: sound.pcm, sampleRate: sound.sampleRate, channels: sound.channels, loop: true)
        }
        guard let hz = try a.double("tone", in: 20...20000) ?? defaultTone else {
            throw Arguments.UsageError(description: "give --tone HZ or --file PATH")
        }
        return .sine(frequency: hz, amplitude: 0.25)
    }

    static func interrupt(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: [], options: ["for", "tone"])
        guard a.positionals.count == 1, let kind = a.positionals.first, kind == "call" || kind == "prompt" else {
            throw Arguments.UsageError(description: "interrupt takes call or prompt")
        }
        guard let seconds = try a.double("for", in: 0.001...86400) else { throw Arguments.UsageError(description: "interrupt needs --for SECONDS") }
        if kind == "call" {
            return try await runReferenceApp(socket: socket, app: "org.interlude.Call", category: .playAndRecord, mode: .voiceChat,
                                             options: [], source: try sourceArgument(a, defaultTone: 990), seconds: seconds,
                                             acceptsDelay: false, obeys: true)
        }
        return try await runReferenceApp(socket: socket, app: "org.interlude.Prompt", category: .playback, mode: .voicePrompt,
                                         options: [.duckOthers, .interruptSpokenAudioAndMixWithOthers],
                                         source: try sourceArgument(a, defaultTone: 1320), seconds: seconds,
                                         acceptsDelay: false, obeys: true)
    }

    /// Runs a reference app until `seconds` of playing pass (for ever if nil) or SIGINT/SIGTERM,
    /// printing its events as JSON lines, then deactivates notifying others and exits 0. A delayed
    /// activation (A4) counts `seconds` from when it starts playing. If the daemon goes away, it
    /// says so and exits 1. If the audio server goes away it keeps running, reconnects with backoff
    /// and reopens its stream as the same session (still paused if interrupted), printing
    /// `audioServerLost` and `streamReopened`.
    static func runReferenceApp(socket: String?, app: String, category: AudioCategory, mode: AudioMode,
                                options: [AudioSessionOption], source: PulsePlaybackStream.Source, seconds: Double?,
                                acceptsDelay: Bool, obeys: Bool) async throws -> Int32 {
        let pulse = PulseConnection(clientName: app, properties: ["application.name": app])
        try connectAudio(pulse)
        defer { pulse.disconnect() }
        let stop = Latch()
        let signals = StopSignals(opening: stop)
        defer { signals.cancel() }
        let ref = ReferenceApp(socket: socket, app: app, category: category, mode: mode, options: options,
                               source: source, pulse: pulse, obeys: obeys) { e in CommandOutput.printJSONLine(e) }
        ref.followAudioServer()  // an audio-server restart: reconnect with backoff, reopen the stream (issue 7 hole 13)
        try await ref.register()
        let r = try await ref.activate(acceptsDelay: acceptsDelay)
        CommandOutput.printJSONLine(WireEvent(event: "activate", data: (try? JSONValue(encoding: r)) ?? .null, time: Date().timeIntervalSince1970))
        // Wait to play (a delayed activation), then play for `seconds`; a stop or a lost daemon ends either wait.
        var outcome = await Latch.first([stop, ref.disconnected, ref.playing])
        if outcome == 2 {
            if let seconds { signals.stop(after: seconds) }
            outcome = await Latch.first([stop, ref.disconnected])
        }
        if outcome == 1 {
            await ref.stop(notifyOthers: false)
            return CommandOutput.fail("the daemon closed the connection; \(CommandOutput.text(app)) stopped")
        }
        await ref.stop(notifyOthers: true)
        CommandOutput.printJSONLine(WireEvent(event: "deactivated", data: .object(["session": .string(ref.session?.rawValue ?? "")]),
                                time: Date().timeIntervalSince1970))
        return 0
    }
}

/// Opens a latch on SIGINT or SIGTERM, or after a time. Outside main.swift on purpose (DESIGN.md:
/// handlers written in main-actor code trap under Swift 6).
final class StopSignals: @unchecked Sendable {
    private let queue = DispatchQueue(label: "interlude.cli.signals")
    private let latch: Latch
    private var sources: [DispatchSourceSignal] = []

    init(opening latch: Latch) {
        self.latch = latch
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        for sig in [SIGINT, SIGTERM] {
            let s = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            s.setEventHandler { latch.open() }
            s.resume()
            sources.append(s)
        }
    }

    /// Opens the latch `seconds` from now.
    func stop(after seconds: Double) {
        let latch = self.latch
        queue.asyncAfter(deadline: .now() + seconds) { latch.open() }
    }

    func cancel() { queue.sync { sources.forEach { $0.cancel() } } }
}
