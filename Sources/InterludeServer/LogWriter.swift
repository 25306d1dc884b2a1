import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's log lines, written to a file descriptor (standard error, which systemd's journal
/// reads) in the order they were logged, but not on the logging thread: a line is appended to a
/// buffer and a writer on a utility queue writes what has gathered with one `write`. The engine
/// logs a line per notification delivered; written there, each was a system call on the engine,
/// a tenth of its time during a notification burst (issue 9).
///
/// Bounded: past `maxPendingBytes` waiting, the logging thread writes them itself (a flood slows
/// the logger, it does not grow the daemon). `flush()` writes everything logged so far; the daemon
/// calls it before it exits. Lines logged just before a crash (a trap) may be lost; the runtime's
/// crash report itself goes straight to standard error.
public final class LogWriter: @unchecked Sendable {
    private let fd: Int32
    private let maxPendingBytes: Int
    private let gatherSeconds: Double
    // `pending` and `scheduled` only under `lock` (NSLock: ThreadSanitizer cannot see Mutex on Linux).
    private let lock = NSLock()
    private var pending: [UInt8] = []
    private var scheduled = false
    /// Serializes the writes: lines leave in the order they were logged.
    private let writing = NSLock()
    let queue = DispatchQueue(label: "interlude.log", qos: .utility)

    /// - Parameters:
    ///   - fd: where lines go (2, standard error, by default). Not closed by this writer.
    ///   - maxPendingBytes: bytes waiting past which the logging thread writes them itself.
    ///   - gatherSeconds: how long the first line waits for others before they are written
    ///     together (seconds; 5 ms by default: a log line is for people, not a clock).
    public init(fd: Int32 = 2, maxPendingBytes: Int = 256 * 1024, gatherSeconds: Double = 0.005) {
        self.fd = fd
        self.maxPendingBytes = maxPendingBytes
        self.gatherSeconds = gatherSeconds
    }

    /// Logs `line` (a newline is added). Returns without waiting for the write, unless
    /// `maxPendingBytes` are waiting.
    public func write(_ line: String) {
        let (schedule, overBound): (Bool, Bool) = lock.withLock {
            pending.append(contentsOf: line.utf8)
            pending.append(0x0a)
            let schedule = !scheduled
            scheduled = true
            return (schedule, pending.count > maxPendingBytes)
        }
        if overBound {
            drain()
        } else if schedule {
            // Lines gather for `gatherSeconds` before one write: a line per notification acknowledged
            // one by one woke the writer's thread for each (issue 9).
            queue.asyncAfter(deadline: .now() + gatherSeconds) { self.drain() }
        }
    }

    /// Writes every line logged so far before returning.
    public func flush() { drain() }

    private func drain() {
        writing.lock()
        defer { writing.unlock() }
        let bytes: [UInt8] = lock.withLock {
            defer {
                pending.removeAll(keepingCapacity: pending.capacity <= 64 * 1024)
                scheduled = false
            }
            return pending
        }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n; continue }
            if n < 0 && errno == EINTR { continue }
            return  // standard error gone or full for good: nothing else to do with a log line
        }
    }
}
