import Foundation
import Testing
import InterludeClient
import InterludeScenario
import InterludeWire

/// Issue 10: `Scripts/install --prefix DIR` makes a self-contained install: the installed daemon
/// finds its built-in config and sounds in `DIR/share/interlude` (not in the source tree), plays
/// the default sound, the systemd user unit passes `systemd-analyze --user verify`, and
/// `--uninstall` leaves DIR as it was. Installs the executables this test run was built with
/// (`--from`), so no second build runs inside the test.
@Suite(.serialized) struct InstallTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Runs a program to its end; returns its status and its output and error text together.
    @discardableResult
    func run(_ exe: String, _ args: [String], environment: [String: String]? = nil) throws -> (status: Int32, out: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        if let environment { p.environment = environment }
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    func listing(_ dir: String) -> [String] {
        (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? []).sorted()
    }

    @Test(.enabled(if: AudioServer.required()))
    func installRunsFromItsPrefixAndUninstallLeavesThePrefixAsItWas() async throws {
        guard let daemonExe = ScenarioRunner.siblingExecutable("interluded") else { throw CocoaError(.fileNoSuchFile) }
        let built = URL(fileURLWithPath: daemonExe).deletingLastPathComponent().path
        let w = try WorkFolder("install")
        defer { w.remove() }
        let prefix = w.path + "/prefix"
        try FileManager.default.createDirectory(atPath: prefix + "/bin", withIntermediateDirectories: true)
        try "the user's own file".write(toFile: prefix + "/bin/mine", atomically: true, encoding: .utf8)
        let before = listing(prefix)

        let script = Self.root.appendingPathComponent("Scripts/install").path
        let install = try run(script, ["--prefix", prefix, "--from", built, "--no-enable"])
        #expect(install.status == 0, "\(install.out)")
        for f in ["bin/interluded", "bin/interlude", "bin/interlude-audio", "bin/interlude-push", "share/interlude/Config/interlude.json5",
                  "share/doc/interlude/REMOTE.md", "share/doc/interlude/SECURITY.md",
                  "share/interlude/Sounds/default.wav", "share/systemd/user/interlude.service"] {
            #expect(FileManager.default.fileExists(atPath: prefix + "/" + f), "\(f) installed")
        }
        let unit = try String(contentsOfFile: prefix + "/share/systemd/user/interlude.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=\(prefix)/bin/interluded") && unit.contains("ExecReload=\(prefix)/bin/interlude reload\n"))
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") {
            // verify needs a runtime folder even without a user manager.
            var env = ProcessInfo.processInfo.environment
            env["XDG_RUNTIME_DIR"] = w.path
            let verify = try run("/usr/bin/systemd-analyze", ["--user", "verify", prefix + "/share/systemd/user/interlude.service"], environment: env)
            #expect(verify.status == 0, "systemd-analyze --user verify: \(verify.out)")
        } else if ProcessInfo.processInfo.environment["CI"] == "true" {
            Issue.record("systemd-analyze is missing (Scripts/test installs systemd): the unit cannot be verified")
        }

        // The installed daemon, started from elsewhere with no INTERLUDE_HOME: its built-in config
        // and sounds come from the prefix.
        var env = w.environment
        env["INTERLUDE_HOME"] = nil
        env["INTERLUDE_CONFIG_DIR"] = nil
        let p = Process()
        p.executableURL = URL(fileURLWithPath: prefix + "/bin/interluded")
        p.arguments = ["--socket", w.socket, "--private", "--state", w.path + "/state"]
        p.environment = env
        p.currentDirectoryURL = URL(fileURLWithPath: "/")
        _ = FileManager.default.createFile(atPath: w.path + "/log", contents: nil)
        p.standardError = FileHandle(forWritingAtPath: w.path + "/log")
        try p.run()
        defer { ScenarioRunner.stop(p) }
        for _ in 0..<100 { guard !UnixSocket.isLive(w.socket) else { break }; try await Task.sleep(nanoseconds: 50_000_000) }
        let played = try run(prefix + "/bin/interlude", ["--socket", w.socket, "play", "default"])
        #expect(played.status == 0 && played.out.contains("played default"), "\(played.out)")
        let status = try run(prefix + "/bin/interlude", ["--socket", w.socket, "status"])
        #expect(status.out.contains("config: \(prefix)/share/interlude/Config/interlude.json5"), "\(status.out)")
        // The unit's reload as systemd runs it (the unit's environment names the socket): it
        // returns once the daemon has re-read its files, and says so.
        let execReload = unit.split(separator: "\n").first { $0.hasPrefix("ExecReload=") }.map { $0.dropFirst("ExecReload=".count).split(separator: " ").map(String.init) } ?? []
        var reloadEnv = env
        reloadEnv["INTERLUDE_SOCKET"] = w.socket
        let reloaded = try run(execReload.first ?? "", Array(execReload.dropFirst()), environment: reloadEnv)
        #expect(reloaded.status == 0 && reloaded.out.contains("config reloaded from \(prefix)/share/interlude/Config/interlude.json5"), "\(execReload): \(reloaded.out)")
        let log = (try? String(contentsOfFile: w.path + "/log", encoding: .utf8)) ?? ""
        #expect(log.contains("built-in config and sounds from \(prefix)/share/interlude"), "\(log)")
        ScenarioRunner.stop(p)

        let uninstall = try run(script, ["--prefix", prefix, "--uninstall"])
        #expect(uninstall.status == 0, "\(uninstall.out)")
        #expect(listing(prefix) == before, "uninstall leaves the prefix as it was")
        #expect(try String(contentsOfFile: prefix + "/bin/mine", encoding: .utf8) == "the user's own file")
    }

    /// A prefix the install made is gone after the uninstall, and an uninstall of a folder that
    /// does not exist makes none (it used to `mkdir -p` the prefix before anything else).
    @Test func aPrefixTheInstallMadeIsRemovedAndUninstallNeverMakesOne() async throws {
        guard let daemonExe = ScenarioRunner.siblingExecutable("interluded") else { throw CocoaError(.fileNoSuchFile) }
        let built = URL(fileURLWithPath: daemonExe).deletingLastPathComponent().path
        let w = try WorkFolder("install-fresh")
        defer { w.remove() }
        let script = Self.root.appendingPathComponent("Scripts/install").path
        let never = w.path + "/never/installed"
        let nothing = try run(script, ["--prefix", never, "--uninstall"])
        #expect(nothing.status == 1, "\(nothing.out)")
        #expect(!FileManager.default.fileExists(atPath: w.path + "/never"), "an uninstall made the folder it was asked to clean")
        let fresh = w.path + "/fresh/prefix"
        let install = try run(script, ["--prefix", fresh, "--from", built, "--no-enable"])
        #expect(install.status == 0, "\(install.out)")
        let uninstall = try run(script, ["--prefix", fresh, "--uninstall"])
        #expect(uninstall.status == 0, "\(uninstall.out)")
        #expect(!FileManager.default.fileExists(atPath: w.path + "/fresh"), "the folders the install made are gone: \(listing(w.path))")
    }
}
