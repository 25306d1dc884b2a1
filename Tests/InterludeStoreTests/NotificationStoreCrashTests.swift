import Foundation
import InterludePolicy
import InterludeStore
import Testing

// N15 "survive a crash": a writer process saving in a loop is killed with SIGKILL at a random
// moment; the database must then load, and hold exactly a state the writer saved: the last one it
// reported saved, or the next one if that commit finished before the report.

/// The environment variable that turns `crashWriterChild` into the writer: it holds the store's folder.
private let writerVariable = "INTERLUDE_STORE_CRASH_WRITER"

@Suite struct NotificationStoreCrashTests {
    /// Not a test of its own: the crash test runs this test binary again with `writerVariable` set
    /// and this test selected, and this test then saves `CrashScript` states until it is killed,
    /// appending `start k` to `progress` in the folder before saving state k and `saved k` after
    /// its save returned. Without the variable it returns at once.
    @Test func crashWriterChild() throws {
        guard let directory = ProcessInfo.processInfo.environment[writerVariable] else { return }
        let store = try NotificationStore(directory: directory)
        let progress = open(directory + "/progress", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        #expect(progress >= 0)
        func report(_ text: String) {
            let line = Array((text + "\n").utf8)
            #expect(write(progress, line, line.count) == line.count)
        }
        var script = CrashScript()
        let deadline = Date().addingTimeInterval(60)  // never outlive a parent that died
        while Date() < deadline {
            report("start \(script.k)")
            try store.save(script.state)
            report("saved \(script.k)")
            script.step()
        }
    }

    @Test func N15_sigkillDuringSavesLeavesExactlyASavedState() throws {
        guard ProcessInfo.processInfo.environment[writerVariable] == nil else { return }  // never recurse
        var killedInsideSave = 0
        for round in 0..<6 {
            if try killWriter(round: round) { killedInsideSave += 1 }
        }
        // A kill between two saves would prove little; with saves taking milliseconds (fsync) and
        // reports microseconds, nearly every kill lands inside one.
        #expect(killedInsideSave >= 1, "no kill landed inside a save")
    }

    /// Runs a writer, kills it with SIGKILL at a random moment after it saved at least 20 states,
    /// and checks what the database holds. Returns whether the kill landed inside a save.
    private func killWriter(round: Int) throws -> Bool {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        try FileManager.default.createDirectory(atPath: tmp.storeDirectory, withIntermediateDirectories: true)
        let progressPath = tmp.storeDirectory + "/progress"

        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        // The test binary SwiftPM builds runs Swift Testing with these arguments (as `swift test` does).
        writer.arguments = ["--testing-library", "swift-testing", "--filter", "crashWriterChild"]
        var environment = ProcessInfo.processInfo.environment
        environment[writerVariable] = tmp.storeDirectory
        writer.environment = environment
        writer.standardOutput = FileHandle.nullDevice
        writer.standardError = FileHandle.nullDevice
        try writer.run()
        defer {
            if writer.isRunning { kill(writer.processIdentifier, SIGKILL) }
            writer.waitUntilExit()
        }

        func progress() -> [Substring] {
            ((try? String(contentsOfFile: progressPath, encoding: .utf8)) ?? "").split(separator: "\n")
        }
        func saved(_ lines: [Substring]) -> [Int] {
            lines.compactMap { $0.hasPrefix("saved ") ? Int($0.dropFirst(6)) : nil }
        }
        let begin = Date()
        while saved(progress()).count < 20, writer.isRunning, Date().timeIntervalSince(begin) < 30 {
            usleep(5_000)
        }
        try #require(writer.isRunning, "the writer exited early: it did not start or could not save")
        usleep(UInt32.random(in: 0..<200_000))
        kill(writer.processIdentifier, SIGKILL)
        writer.waitUntilExit()
        #expect(writer.terminationReason == .uncaughtSignal && writer.terminationStatus == SIGKILL)

        let lines = progress()
        let reported = saved(lines)
        #expect(reported == Array(0..<reported.count))  // one report per save, in order
        let last = try #require(reported.last)
        // The writer was killed after its 20th report (states 0…19), possibly at once.
        #expect(reported.count >= 20, "the writer saved too few states for the kill to mean anything")
        let insideSave = lines.last?.hasPrefix("start ") == true

        // The writer never closed the database: loading must recover it from its write-ahead log.
        #expect(FileManager.default.fileExists(atPath: tmp.databasePath + "-wal"))
        let loaded = try NotificationStore(directory: tmp.storeDirectory).load()
        let states = CrashScript.states(last + 2)
        // The state is whole: badge and center agree on one number k…
        let k = loaded.apps[CrashScript.app]?.badge ?? -1
        #expect(loaded.delivered.last?.request.identifier == "n\(k)")
        // …and it is exactly the last state reported saved, or the next one if its commit finished
        // before the kill but its report did not.
        #expect(loaded == states[last] || loaded == states[last + 1], "loaded state k=\(k), last reported save \(last)")
        print("N15 crash round \(round): killed after \(last + 1) reported saves, "
            + (insideSave ? "inside save \(last + 1)" : "between saves") + "; the file holds state \(k)")
        return insideSave
    }
}
