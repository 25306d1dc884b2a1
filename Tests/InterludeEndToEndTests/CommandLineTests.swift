import Foundation
import Testing
import InterludeClient
import InterludeScenario
import InterludeWire

/// The `interlude` executable as a user runs it, against a real `interluded` on a real PulseAudio
/// server: the client-only commands answer themselves, the audio commands are handed to
/// `interlude-audio` (issue 3: `interlude` links neither libpulse nor libsndfile), and errors exit
/// with status 2 (usage) or 1 (the daemon or the server) and a message on standard error.
@Suite(.serialized) struct CommandLineEndToEndTests {
    struct Run { var status: Int32; var out: String; var err: String }

    /// Runs the built `interlude` with `args` and waits for it (at most `timeout` seconds).
    func interlude(_ args: [String], timeout: Double = 20) throws -> Run {
        guard let path = ScenarioRunner.siblingExecutable("interlude") else { throw CocoaError(.fileNoSuchFile) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        // Read both pipes to the end before waiting, so a full pipe cannot stall the child.
        let outData = ReadAll(out.fileHandleForReading), errData = ReadAll(err.fileHandleForReading)
        let deadline = Date().addingTimeInterval(timeout)
        while p.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        return Run(status: p.terminationStatus, out: outData.text(), err: errData.text())
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
        // Parsed by interlude-audio: the hand-off keeps the arguments and the exit status.
        let session = try interlude(["session", "--app", "org.example.Music", "--category", "loud"])
        #expect(session.status == 2)
        #expect(session.err.contains("unknown category loud"), "\(session.err)")
        let interrupt = try interlude(["interrupt", "meeting", "--for", "1"])
        #expect(interrupt.status == 2)
        #expect(interrupt.err.contains("interrupt takes call or prompt"), "\(interrupt.err)")
    }

    @Test func noDaemonIsAClearErrorWithStatusOne() throws {
        let r = try interlude(["--socket", "/nonexistent/interlude/socket", "play", "default"])
        #expect(r.status == 1)
        #expect(r.err.contains("no daemon at /nonexistent/interlude/socket"), "\(r.err)")
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
        FileManager.default.createFile(atPath: sounds + "/empty.wav", contents: Data())
        try w.config(#"{ authorization: { default: "grant" } }"#)
        let daemon = try DaemonProcess(socket: socket, work: w.path, environment: w.environment)
        defer { daemon.stop() }

        let bad = try interlude(["--socket", socket, "notify", "--app", "org.example.Chat", "--title", "hi", "--sound", sounds + "/empty.wav"])
        #expect(bad.status == 0, "\(bad.err)")
        #expect(bad.out.contains("delivered"), "\(bad.out)")
        #expect(bad.err.contains("warning:") && bad.err.contains("played default instead"), "stderr: \(bad.err)")

        let good = try interlude(["--socket", socket, "notify", "--app", "org.example.Chat", "--title", "hi again", "--sound", "default"])
        #expect(good.status == 0, "\(good.err)")
        #expect(!good.err.contains("warning"), "stderr: \(good.err)")

        // Without --sound the CLI asks for no sound, as a protocol request without `sound` does
        // (it used to ask for the default, unlike the protocol).
        let silent = try interlude(["--socket", socket, "notify", "--app", "org.example.Other", "--title", "quiet", "--json"])
        #expect(silent.status == 0, "\(silent.err)")
        let decision = try JSONValue.parse(Data(silent.out.utf8))
        #expect(decision["decision"]?["sound"] == nil, "\(silent.out)")
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
        for _ in 0..<100 where !active {
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
