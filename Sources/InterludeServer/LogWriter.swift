import Dispatch
import Foundation
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's log lines, written to a file descriptor (standard error, which systemd's journal
/// reads) in the order they were logged, but not on the logging thread: a line is appended to a
/// buffer, and a writer thread of its own writes what has gathered with one `write`. The engine
/// logs a line per notification decided; written there, each was a system call on the engine, a
/// tenth of its time during a notification burst (issue 9).
///
/// The writer thread sleeps on a condition variable while nothing is logged (no wake-ups when
/// idle). Woken by a line, it lets lines gather for `gatherSeconds` and writes them together: one
/// wake-up per gathering, not per line (a line per notification acknowledged one by one woke a
/// dispatch thread each). No dispatch timer is involved: in one of 50 daemons started at once
/// under load, a `DispatchQueue.asyncAfter` that should have written the gathered lines never ran,
/// and its log stopped after two lines.
///
/// Bounded: past `maxPendingBytes` waiting, the logging thread writes them itself (a flood slows
/// the logger, it does not grow the daemon).
///
/// Quiet: with `onQuiet`, the writer thread calls it once when `quietSeconds` pass with no line
/// after some were written: the daemon logs a line for every notification it decides and every
/// audio session it acts on, so that is when a burst is over, and the daemon then gives the heap
/// the burst left free back to the system (`malloc_trim`, issue 9). Only a timed wait while a
/// quiet period runs: an idle daemon's writer sleeps without a timeout, as before. `flush()` writes everything logged so far; the daemon
/// calls it before it exits. Lines logged just before a crash (a trap) may be lost; the runtime's
/// crash report itself goes straight to standard error.
public final class LogWriter: @unchecked Sendable {
    private let fd: Int32
    private let maxPendingBytes: Int
    private let gatherSeconds: Double
    private let quietSeconds: Double
    private let onQuiet: (@Sendable () -> Void)?
    // `pending` and `writerStarted` only under `condition` (NSCondition: ThreadSanitizer cannot
    // see Mutex on Linux).
    private let condition = NSCondition()
    private var pending: [UInt8] = []
    private var writerStarted = false
    /// Serializes the writes: lines leave in the order they were logged.
    private let writing = NSLock()

    /// - Parameters:
    ///   - fd: where lines go (2, standard error, by default). Not closed by this writer.
    ///   - maxPendingBytes: bytes waiting past which the logging thread writes them itself.
    ///   - gatherSeconds: how long the writer lets lines gather after the first before it writes
    ///     them together (seconds; 5 ms by default: a log line is for people, not a clock).
    ///   - quietSeconds: how long after the last line written `onQuiet` is called (seconds).
    ///   - onQuiet: called on the writer thread, once per quiet period (not for lines it logs
    ///     itself, which would start the next period: it should not log).
    public init(fd: Int32 = 2, maxPendingBytes: Int = 256 * 1024, gatherSeconds: Double = 0.005,
                quietSeconds: Double = 5, onQuiet: (@Sendable () -> Void)? = nil) {
        self.fd = fd
        self.maxPendingBytes = maxPendingBytes
        self.gatherSeconds = gatherSeconds
        self.quietSeconds = quietSeconds
        self.onQuiet = onQuiet
    }

    /// `text` as one log line: control characters (C0, DEL, C1), the Unicode line and paragraph
    /// separators and the bidirectional controls (U+200E/F, U+202A…E, U+2066…9) become `\u{XX}`
    /// escapes, and a backslash becomes `\\`, so a title or app id an app chose can neither start
    /// a line of its own that reads like the daemon's (`interluded: …`), nor show another app's id
    /// reversed, nor pass for an escape. Everything else as is.
    public static func oneLine(_ text: String) -> String {
        UnsafeText.rewriting(text) { u in u == "\\" ? "\\\\" : UnsafeText.mustEscape(u) ? UnsafeText.escaped(u) : nil }
    }

    /// Logs `line` (a newline is added). Returns without waiting for the write, unless
    /// `maxPendingBytes` are waiting.
    public func write(_ line: String) {
        condition.lock()
        pending.append(contentsOf: line.utf8)
        pending.append(0x0a)
        let overBound = pending.count > maxPendingBytes
        let start = !writerStarted
        writerStarted = true
        condition.signal()  // no system call unless the writer waits for it
        condition.unlock()
        if start {
            let t = Thread { [self] in writerLoop() }
            t.name = "interlude-log"
            t.start()
        }
        if overBound { drain() }
    }

    /// Writes every line logged so far before returning.
    public func flush() { drain() }

    /// The writer thread: waits for a line, lets others gather, writes them all; for ever (the
    /// writer lives as long as the process). After lines, the wait is timed: `onQuiet` when it
    /// times out with nothing logged.
    private func writerLoop() {
        var quietPeriod = false
        while true {
            condition.lock()
            while pending.isEmpty {
                if quietPeriod, let onQuiet {
                    if !condition.wait(until: Date(timeIntervalSinceNow: quietSeconds)), pending.isEmpty {
                        quietPeriod = false
                        condition.unlock()
                        onQuiet()
                        condition.lock()
                    }
                } else {
                    condition.wait()
                }
            }
            condition.unlock()
            if gatherSeconds > 0 { usleep(UInt32(min(gatherSeconds, 60) * 1_000_000)) }
            drain()
            quietPeriod = true
        }
    }

    private func drain() {
        writing.lock()
        defer { writing.unlock() }
        condition.lock()
        let bytes = pending
        pending.removeAll(keepingCapacity: pending.capacity <= 64 * 1024)
        condition.unlock()
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n; continue }
            if n < 0 && errno == EINTR { continue }
            return  // standard error gone or full for good: nothing else to do with a log line
        }
    }
}
