import Foundation
import Testing
import InterludePulse

/// A second private server of the test's own, of the kind the suite runs on (Scripts/lib/pulse.sh,
/// or Scripts/lib/pipewire.sh when INTERLUDE_AUDIO_SERVER=pipewire), which the test can kill and
/// restart. The server and its monitor reader are children of a bash that waits for them, so they
/// are reaped when they die.
final class PrivateServer: @unchecked Sendable {
    static let scripts = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Scripts/lib")
    static let pipeWire = ProcessInfo.processInfo.environment["INTERLUDE_AUDIO_SERVER"] == "pipewire"
    static let library = scripts.appendingPathComponent(pipeWire ? "pipewire.sh" : "pulse.sh").path
    static let startFunction = pipeWire ? "interlude_start_pipewire" : "interlude_start_pulse"
    static let stopFunction = pipeWire ? "interlude_stop_pipewire" : "interlude_stop_pulse"
    /// What a crash kills: PulseAudio; or PipeWire's whole stack (pipewire-pulse, the session manager
    /// and the graph), which a restart then replaces.
    static let crashPIDFiles = pipeWire ? ["pipewire-pulse.pid", "wireplumber.pid", "pipewire.pid"] : ["pulse.pid"]

    let dir: String
    var server: String { Self.pipeWire ? "unix:\(dir)/runtime/pulse/native" : "unix:\(dir)/pa.sock" }
    private var owner: Process?

    init() throws {
        dir = "/tmp/interlude-reconnect-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    /// Starts the server (returns once it answers and its monitor reader runs).
    func start() async throws {
        if owner != nil { stopProcesses() }  // what is left of a killed server
        let ready = dir + "/ready"
        try? FileManager.default.removeItem(atPath: ready)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", "source \"$0\" && \(Self.startFunction) \"$1\" && touch \"$1/ready\"; wait",
                             Self.library, dir]
        try process.run()
        owner = process
        let deadline = PulseClock.monotonicSeconds() + 15
        while !FileManager.default.fileExists(atPath: ready) {
            guard process.isRunning, PulseClock.monotonicSeconds() < deadline else {
                throw PulseError(code: "connectionFailed", message: "private server in \(dir) did not start; see the logs in \(dir)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// SIGKILLs the server: the connection breaks as in a crash.
    func kill() throws {
        for file in Self.crashPIDFiles {
            let pid = try String(contentsOfFile: dir + "/" + file, encoding: .utf8)
            guard let pid = pid32(pid) else { continue }
            Foundation.kill(pid, SIGKILL)
        }
    }

    /// Stops whatever runs and waits for the owning bash.
    func stop() {
        stopProcesses()
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func stopProcesses() {
        let stopper = Process()
        stopper.executableURL = URL(fileURLWithPath: "/bin/bash")
        stopper.arguments = ["-c", "source \"$0\" && \(Self.stopFunction) \"$1\"", Self.library, dir]
        try? stopper.run()
        stopper.waitUntilExit()
        owner?.waitUntilExit()
        owner = nil
    }

    private func pid32(_ text: String) -> Int32? { Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) }
}

extension PulseAdapterTests {
    @Test("reconnect: a server that dies gives .disconnected; when it is back, .connected and working calls")
    func reconnect() async throws {
        try TestServer.connect().disconnect()  // the same skip-or-fail rule when PulseAudio is unavailable
        let server = try PrivateServer()
        defer { server.stop() }
        try await server.start()

        let pulse = PulseConnection(server: server.server, clientName: "interlude-reconnect-test")
        defer { pulse.disconnect() }
        let log = EventLog(pulse)
        try pulse.connect()
        pulse.enableReconnect()
        #expect(await log.wait { $0 == .connected } != nil)
        let stream = try tone(pulse, 500)
        let index = stream.sinkInputIndex
        try await pulse.rampGain(sinkInput: index, toDb: -14, duration: 0)

        let mark = log.all.count
        let killed = now()
        try server.kill()
        let down = await log.wait(from: mark, timeout: 5) { $0 == .disconnected }
        let downAt = log.time(from: mark) { $0 == .disconnected } ?? .nan
        #expect(down != nil)
        let whileDown = #expect(throws: PulseError.self) { try pulse.sinkInputs() }
        #expect(whileDown?.code == "notConnected")
        #expect(throws: PulseError.self) { try stream.setCorked(true) }
        stream.close()
        await sleep(1.0)  // down long enough for a few failed attempts: 0.1, 0.3, 0.7 s; the next is at 1.5 s

        let restart = now()
        try await server.start()
        let up = await log.wait(from: mark, timeout: 10) { $0 == .connected }
        let upAt = log.time(from: mark) { $0 == .connected } ?? .nan
        #expect(up != nil)
        // Backoff 0.1 s doubling: attempts at 0.1, 0.3, 0.7, 1.5, 3.1 s after the loss. The server was
        // back at ~1.1 s, so the 1.5 s attempt connects: not sooner (no hammering), not much later.
        #expect(upAt - killed > 1.3 && upAt - killed < 3.5, "reconnected \(upAt - killed) s after the loss")
        let again = try tone(pulse, 500)
        defer { again.close() }
        let listed = try pulse.sinkInputs()
        print("[measured] reconnect: .disconnected \(String(format: "%.3f", downAt - killed)) s after SIGKILL; "
              + "restarted \(String(format: "%.3f", restart - killed)) s after it; .connected \(String(format: "%.3f", upAt - restart)) s after the restart began")
        #expect(listed.contains { $0.index == again.sinkInputIndex && $0.gainDb == 0 })
        #expect(!listed.contains { $0.index == index && $0.gainDb != 0 })
    }
}
