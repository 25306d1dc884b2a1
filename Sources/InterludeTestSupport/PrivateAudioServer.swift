import Foundation

/// A private audio server of a test's own, of the kind the suite runs on (Scripts/lib/pulse.sh,
/// or Scripts/lib/pipewire.sh when `INTERLUDE_AUDIO_SERVER=pipewire`), which the test can kill
/// and restart (reconnect tests, issue 7's holes 12 and 13). The server and its monitor reader are
/// children of a bash that waits for them, so they are reaped when they die. Its null sink is
/// `interlude_out`, the default sink.
public final class PrivateAudioServer: @unchecked Sendable {
    /// A server that did not start (its logs are in ``dir``).
    public struct StartError: Error, CustomStringConvertible { public var description: String }

    static let scripts = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Scripts/lib")
    /// Whether the suite runs on PipeWire's pulse server (`INTERLUDE_AUDIO_SERVER=pipewire`).
    public static let pipeWire = ProcessInfo.processInfo.environment["INTERLUDE_AUDIO_SERVER"] == "pipewire"
    static let library = scripts.appendingPathComponent(pipeWire ? "pipewire.sh" : "pulse.sh").path
    static let startFunction = pipeWire ? "interlude_start_pipewire" : "interlude_start_pulse"
    static let stopFunction = pipeWire ? "interlude_stop_pipewire" : "interlude_stop_pulse"
    /// What a crash kills: PulseAudio; or PipeWire's whole stack (pipewire-pulse, the session manager
    /// and the graph), which a restart then replaces.
    static let crashPIDFiles = pipeWire ? ["pipewire-pulse.pid", "wireplumber.pid", "pipewire.pid"] : ["pulse.pid"]

    /// The folder of the server's sockets, state and logs.
    public let dir: String
    /// The server string for `PULSE_SERVER` / `PulseConnection(server:)`.
    public var server: String { Self.pipeWire ? "unix:\(dir)/runtime/pulse/native" : "unix:\(dir)/pa.sock" }
    /// The null sink's monitor source.
    public var monitor: String { "interlude_out.monitor" }
    private var owner: Process?

    /// - Parameter name: distinguishes servers of one test process (the folder is
    ///   `/tmp/interlude-server-NAME-PID`, apart from the tests' work folders).
    public init(_ name: String = "reconnect") throws {
        dir = "/tmp/interlude-server-\(name)-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    /// Starts the server (returns once it answers and its monitor reader runs).
    /// - Throws: ``StartError`` when it does not answer within 15 s.
    public func start() async throws {
        if owner != nil { stopProcesses() }  // what is left of a killed server
        let ready = dir + "/ready"
        try? FileManager.default.removeItem(atPath: ready)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", "source \"$0\" && \(Self.startFunction) \"$1\" && touch \"$1/ready\"; wait",
                             Self.library, dir]
        try process.run()
        owner = process
        let deadline = ProcessInfo.processInfo.systemUptime + 15
        while !FileManager.default.fileExists(atPath: ready) {
            guard process.isRunning, ProcessInfo.processInfo.systemUptime < deadline else {
                throw StartError(description: "private server in \(dir) did not start; see the logs in \(dir)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// SIGKILLs the server: every connection breaks as in a crash.
    /// Sends `signal` to the server's processes (`SIGSTOP` freezes it, as a hung server: its
    /// socket stays open and nothing answers; `SIGCONT` lets it go on).
    public func signal(_ signal: Int32) throws {
        for file in Self.crashPIDFiles {
            let text = try String(contentsOfFile: dir + "/" + file, encoding: .utf8)
            guard let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { continue }
            Foundation.kill(pid, signal)
        }
    }

    public func kill() throws {
        for file in Self.crashPIDFiles {
            let text = try String(contentsOfFile: dir + "/" + file, encoding: .utf8)
            guard let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { continue }
            Foundation.kill(pid, SIGKILL)
        }
    }

    /// Stops whatever runs, waits for the owning bash and removes the folder.
    public func stop() {
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
}
