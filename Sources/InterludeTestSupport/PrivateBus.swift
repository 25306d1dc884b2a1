import Foundation

/// A private D-Bus session bus for one test (`dbus-daemon --session` with a config of its own and
/// no `<servicedir>`, so that no installed notification daemon is started by activation while the
/// name is free; DESIGN.md's D-Bus facts). Stopped by ``stop()``.
public final class PrivateBus: @unchecked Sendable {
    /// The bus address (`unix:path=…,guid=…`).
    public let address: String
    /// The folder holding its config and socket.
    public let folder: String
    let pid: Int32

    /// Starts the bus in a new temporary folder named after `name`.
    /// - Throws: when `dbus-daemon` is missing or does not start.
    public init(_ name: String) throws {
        folder = NSTemporaryDirectory() + "interlude-bus-\(name)-\(getpid())"
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let config = """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:path=\(folder)/bus.sock</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """
        try config.write(toFile: folder + "/session.conf", atomically: true, encoding: .utf8)
        // Through system(3), into files: the forked daemon keeps descriptors it inherits, and
        // Foundation's Process would then wait for it forever.
        let rc = system("/usr/bin/dbus-daemon --config-file='\(folder)/session.conf' --fork --print-address=1 --print-pid=1 "
                        + ">'\(folder)/address' 2>'\(folder)/dbus-daemon.log' </dev/null")
        var lines: [String] = []
        for _ in 0..<100 {
            lines = ((try? String(contentsOfFile: folder + "/address", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            if lines.count >= 2 { break }
            usleep(20_000)
        }
        guard rc == 0, lines.count >= 2, let pid = Int32(lines[1]) else {
            let log = (try? String(contentsOfFile: folder + "/dbus-daemon.log", encoding: .utf8)) ?? ""
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "dbus-daemon did not start: \(log)"])
        }
        address = lines[0]
        self.pid = pid
    }

    /// Whether `dbus-daemon` is installed.
    public static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon") }

    /// This process's environment with `DBUS_SESSION_BUS_ADDRESS` set to this bus.
    public var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["DBUS_SESSION_BUS_ADDRESS"] = address
        return env
    }

    /// Stops the bus and removes its folder.
    public func stop() {
        kill(pid, SIGTERM)
        // Removed once the daemon is gone (up to 2 s): it unlinks its socket as it exits, and a
        // removal racing that stopped half-way (a run left dozens of these folders in /tmp).
        for _ in 0..<200 where kill(pid, 0) == 0 { usleep(10_000) }
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// What a finished command printed.
    public struct Output: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// Runs `path` with `arguments` (and `environment`), waits at most `timeout` seconds (then
    /// SIGKILL, status 137).
    public static func run(_ path: String, _ arguments: [String], environment: [String: String]? = nil,
                           timeout: Double = 20, stderrFile: String? = nil) throws -> Output {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        if let environment { p.environment = environment }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        if let stderrFile {
            _ = FileManager.default.createFile(atPath: stderrFile, contents: nil)
            p.standardError = FileHandle(forWritingAtPath: stderrFile)
            try? err.fileHandleForWriting.close()
        } else {
            p.standardError = err
        }
        try p.run()
        let killer = DispatchWorkItem { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = stderrFile == nil ? err.fileHandleForReading.readDataToEndOfFile() : Data()
        p.waitUntilExit()
        killer.cancel()
        return Output(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
    }

    /// Runs a command on this bus (its environment, `DBUS_SESSION_BUS_ADDRESS` set).
    public func run(_ path: String, _ arguments: [String], timeout: Double = 20) throws -> Output {
        try PrivateBus.run(path, arguments, environment: environment, timeout: timeout)
    }

    /// Starts a command on this bus without waiting (stdout into a pipe read by ``Background``).
    public func start(_ path: String, _ arguments: [String]) throws -> Background {
        try Background(path, arguments, environment: environment)
    }

    /// A command running in the background; its output is read when it ends.
    public final class Background: @unchecked Sendable {
        public let process = Process()
        let out = Pipe()
        let err = Pipe()
        public init(_ path: String, _ arguments: [String], environment: [String: String]) throws {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
            process.environment = environment
            process.standardOutput = out
            process.standardError = err
            try process.run()
        }
        /// Waits at most `timeout` seconds for it to end (then SIGKILL), and returns its output.
        public func finish(timeout: Double = 10) -> Output {
            let deadline = Date().addingTimeInterval(timeout)
            while process.isRunning, Date() < deadline { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            let o = out.fileHandleForReading.readDataToEndOfFile()
            let e = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return Output(status: process.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
        }
        /// Stops it (SIGTERM) and returns its output.
        public func stop() -> Output {
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            return finish(timeout: 3)
        }
    }
}

/// Runs a blocking `body` on a thread of its own and returns what it returned. Not on
/// `DispatchQueue.global()`: on Linux its default-priority threads are the ones Swift's pool runs
/// tasks on, so 40 commands waited for there (a flood of `notify-send`s) took every such thread
/// and the engine's tasks, which the commands were waiting for, could not run until the commands'
/// timeouts killed them.
func onThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (k: CheckedContinuation<T, any Error>) in
        Thread { k.resume(with: Result { try body() }) }.start()
    }
}

extension PrivateBus {
    /// ``run(_:_:timeout:)`` on a thread of its own, off Swift's cooperative pool (a blocking wait
    /// there can starve the engine's tasks on a 2-core machine): for async tests.
    public func exec(_ path: String, _ arguments: [String], timeout: Double = 20) async throws -> Output {
        let env = environment
        return try await onThreadOfItsOwn { try PrivateBus.run(path, arguments, environment: env, timeout: timeout) }
    }
}

extension PrivateBus.Background {
    /// ``finish(timeout:)`` off the cooperative pool.
    public func ended(timeout: Double = 10) async -> PrivateBus.Output {
        (try? await onThreadOfItsOwn { self.finish(timeout: timeout) }) ?? PrivateBus.Output(status: -1, stdout: "", stderr: "")
    }
    /// ``stop()`` off the cooperative pool.
    public func stopped() async -> PrivateBus.Output {
        (try? await onThreadOfItsOwn { self.stop() }) ?? PrivateBus.Output(status: -1, stdout: "", stderr: "")
    }
}
