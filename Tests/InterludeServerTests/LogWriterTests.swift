import Foundation
@testable import InterludeServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's log (issue 9): written off the logging thread, every line, in order.
@Suite struct LogWriterTests {
    /// A temporary file open for writing, and a way to read what it holds.
    static func file() -> (fd: Int32, read: () -> [String], remove: () -> Void) {
        let path = NSTemporaryDirectory() + "interlude-log-\(UUID().uuidString.prefix(8))"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        return (fd, {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            return text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        }, { close(fd); unlink(path) })
    }

    /// An app's text (an id, a title) cannot start a log line of its own: line breaks and other
    /// control characters are escaped; ordinary text, tabs' neighbours and non-ASCII stay.
    @Test(arguments: [
        ("plain café ✓", "plain café ✓"),
        ("a\ninterluded: forged", "a\\u{A}interluded: forged"),
        ("cr\rtab\tnul\u{0}", "cr\\u{D}tab\\u{9}nul\\u{0}"),
        ("del\u{7F}c1\u{85}ls\u{2028}ps\u{2029}", "del\\u{7F}c1\\u{85}ls\\u{2028}ps\\u{2029}"),
        // A typed escape is not a line break: the backslash is doubled.
        ("p\\u{A}q", "p\\\\u{A}q"),
        // Right-to-left override: "org.example.\u{202E}knaB" would show as "org.example.Bank".
        ("org.example.\u{202E}knaB", "org.example.\\u{202E}knaB"),
    ])
    func oneLineEscapesWhatWouldBreakTheLine(_ text: String, _ expected: String) {
        #expect(LogWriter.oneLine(text) == expected)
        #expect(!LogWriter.oneLine(text).contains("\n"))
    }

    @Test func everyLineIsWrittenInTheOrderOfEachLoggingThread() async {
        let f = Self.file()
        defer { f.remove() }
        let log = LogWriter(fd: f.fd)
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<4 {
                group.addTask { for i in 0..<2000 { log.write("t\(t) \(i)") } }
            }
        }
        log.flush()
        let lines = f.read()
        #expect(lines.count == 8000)
        for t in 0..<4 {
            #expect(lines.filter { $0.hasPrefix("t\(t) ") } == (0..<2000).map { "t\(t) \($0)" })
        }
    }

    @Test func pastTheBoundTheLoggingThreadWritesItself() {
        let f = Self.file()
        defer { f.remove() }
        // The writer thread gathers for a minute: only the logging thread itself can write now.
        let log = LogWriter(fd: f.fd, maxPendingBytes: 64, gatherSeconds: 60)
        log.write("short")  // under the bound: left to the (gathering) writer thread
        #expect(f.read() == [])
        log.write(String(repeating: "x", count: 100))  // over it: written before write returns
        #expect(f.read() == ["short", String(repeating: "x", count: 100)])
    }

    /// Without a flush, the writer thread writes what gathered soon after (5 ms by default). A
    /// dispatch timer that did this once never fired in one daemon of 50, whose log then stopped.
    @Test func aLineIsWrittenSoonWithoutAFlush() async throws {
        let f = Self.file()
        defer { f.remove() }
        let log = LogWriter(fd: f.fd)
        for round in 0..<20 {
            log.write("line \(round)")
            let deadline = Date().addingTimeInterval(2)
            while f.read().count <= round, Date() < deadline { try await Task.sleep(nanoseconds: 1_000_000) }
            #expect(f.read().count == round + 1, "line \(round) not written within 2 s")
        }
    }

    /// `onQuiet` (the daemon's heap trim after a burst, issue 9) comes once per quiet period: not
    /// while lines keep coming, once when they stop, not again until a line starts another period.
    @Test func onQuietComesOnceWhenTheLinesStop() async throws {
        let f = Self.file()
        defer { f.remove() }
        let calls = Counter()
        let log = LogWriter(fd: f.fd, gatherSeconds: 0.001, quietSeconds: 0.5, onQuiet: { calls.add() })
        try await Task.sleep(nanoseconds: 800_000_000)
        #expect(calls.value == 0, "quiet without any line before")
        // A line every 50 ms for 0.5 s: never 0.5 s without one, unless the machine stalled this
        // task that long (seen with the suites run in parallel at load average 8): then the writer
        // was right to call, and the check is only made when no gap reached the quiet time.
        var last = ContinuousClock.now, longestGap = Duration.zero
        var lastLine = ContinuousClock.now
        for i in 0..<10 {
            if i > 0 { try await Task.sleep(nanoseconds: 50_000_000) }
            longestGap = max(longestGap, ContinuousClock.now - last)
            last = ContinuousClock.now
            lastLine = ContinuousClock.now  // taken before the line: its quiet call comes after
            log.write("busy \(i)")
        }
        if longestGap < .milliseconds(400) { #expect(calls.value - calls.calls(after: lastLine) == 0, "called while lines kept coming") }
        // Counted by when they came, not by a count read after the last line: a stall of this
        // task after it let the call come before such a read, and the test then waited for a
        // second call that was not owed (seen once in a parallel run).
        let deadline = Date().addingTimeInterval(5)
        while calls.calls(after: lastLine) == 0, Date() < deadline { try await Task.sleep(nanoseconds: 10_000_000) }
        #expect(calls.calls(after: lastLine) == 1)
        try await Task.sleep(nanoseconds: 1_200_000_000)
        #expect(calls.calls(after: lastLine) == 1, "called again with no line in between")
        let again = ContinuousClock.now
        log.write("again")
        while calls.calls(after: again) == 0, Date() < deadline.addingTimeInterval(5) { try await Task.sleep(nanoseconds: 10_000_000) }
        #expect(calls.calls(after: again) == 1)
    }

    /// Calls counted with the instant each came.
    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var times: [ContinuousClock.Instant] = []
        func add() { lock.withLock { times.append(.now) } }
        var value: Int { lock.withLock { times.count } }
        func calls(after t: ContinuousClock.Instant) -> Int { lock.withLock { times.filter { $0 > t }.count } }
    }
}
