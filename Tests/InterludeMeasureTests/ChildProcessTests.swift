import Foundation
import Synchronization
import Testing
import InterludeTestSupport

/// The test helpers' child processes (`ChildProcess`): outputs captured, input written, exits read
/// with waitpid, and a child that inherits nothing but 0, 1 and 2 (the inherited descriptor of a
/// sibling is what hid exits from Foundation's `Process`, see its doc comment).
@Suite struct ChildProcessTests {
    @Test func runCapturesBothOutputsAndTheStatus() throws {
        let r = try ChildProcess.run("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"])
        #expect(r.exit == .exited(3) && r.status == 3)
        #expect(r.stdout == "out\n" && r.stderr == "err\n")
    }

    /// A megabyte through `cat`: the input is written while both outputs are read, no deadlock.
    @Test func inputIsWrittenWhileOutputIsRead() throws {
        let text = String(repeating: "0123456789abcdef\n", count: 65536)
        let r = try ChildProcess.run("/bin/cat", [], stdin: text, timeout: 20)
        #expect(r.exit == .exited(0))
        #expect(r.stdout.utf8.count == text.utf8.count && r.stdout == text)
    }

    @Test func aSignalAndATimeoutAreSaidAsSignals() throws {
        let child = try ChildProcess("/bin/sleep", ["30"])
        #expect(child.isRunning && child.exited == nil)
        #expect(child.wait(timeout: 0.1) == nil)
        #expect(child.kill() == .signaled(SIGKILL))
        #expect(child.exited == .signaled(SIGKILL) && !child.isRunning)
        let r = try ChildProcess.run("/bin/sleep", ["30"], timeout: 0.2)
        #expect(r.exit == .signaled(SIGKILL) && r.status == 128 + SIGKILL)
        let t = try ChildProcess("/bin/sleep", ["30"])
        #expect(t.stop(grace: 5) == .signaled(SIGTERM))
    }

    @Test func standardErrorAppendsToAFileAcrossChildren() throws {
        let file = NSTemporaryDirectory() + "interlude-child-\(getpid()).log"
        defer { try? FileManager.default.removeItem(atPath: file) }
        for word in ["first", "second"] {
            let c = try ChildProcess("/bin/sh", ["-c", "echo \(word) >&2"], stderr: .appendTo(file))
            #expect(c.wait(timeout: 10) == .exited(0))
        }
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "first\nsecond\n")
    }

    @Test func theEnvironmentIsTheOneGiven() throws {
        let r = try ChildProcess.run("/usr/bin/env", [], environment: ["ONLY": "this"])
        #expect(r.stdout == "ONLY=this\n")
    }

    @Test func aMissingExecutableThrows() {
        #expect(throws: ChildProcess.SpawnError.self) { try ChildProcess("/nonexistent/interlude-x", []) }
    }

    /// The child has only 0, 1 and 2 open, though this process holds a descriptor without
    /// O_CLOEXEC (as Foundation's Process leaves its socket pairs and pipes).
    @Test func aChildInheritsOnlyItsThreeStandardDescriptors() throws {
        let leaky = open("/dev/null", O_RDONLY)   // no O_CLOEXEC
        #expect(leaky >= 3)
        defer { close(leaky) }
        let r = try ChildProcess.run("/bin/ls", ["/proc/self/fd"])
        // ls opens the folder it lists (one more descriptor of its own, 3).
        let fds = r.stdout.split(separator: "\n").compactMap { Int32($0) }.sorted()
        #expect(fds == [0, 1, 2, 3], "\(fds)")
        #expect(!fds.contains(leaky) || leaky == 3, "the child inherited descriptor \(leaky)")
    }

    /// Short children run from one thread while another starts and kills long ones: every exit is
    /// seen at once (with Foundation's Process one such exit went unseen for good).
    @Test func exitsAreSeenWhileAnotherThreadStartsChildren() throws {
        let stop = Mutex(false)
        let other = Thread {
            while !stop.withLock({ $0 }) {
                if let c = try? ChildProcess("/bin/sleep", ["30"]) { usleep(2_000); c.kill() }
            }
        }
        other.start()
        defer { stop.withLock { $0 = true } }
        var slowest = 0.0
        for _ in 0..<150 {
            let t0 = Date()
            let r = try ChildProcess.run("/bin/sh", ["-c", "echo x"], timeout: 10)
            #expect(r.exit == .exited(0) && r.stdout == "x\n")
            slowest = max(slowest, Date().timeIntervalSince(t0))
        }
        #expect(slowest < 10, "a child's exit was seen only after \(slowest) s")
    }
}
