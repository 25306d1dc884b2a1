import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Spawns commands with `posix_spawnp` (less work in the parent than Foundation's `Process`, so the
/// time measured is the command's own), stdin and stdout on /dev/null, stderr inherited.
public enum Spawn {
    /// A command that could not start or failed.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Starts `argv` (looked up on PATH) and returns its pid. Signals start unblocked and at their
    /// defaults in the child (a thread of ours may have some blocked).
    /// With `stderrPath`, the command's standard error goes to that file (created or truncated).
    public static func start(_ argv: [String], stderrPath: String? = nil) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        if let stderrPath {
            posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attr, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGINT, SIGTERM, SIGCHLD] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for p in cargs { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, argv[0], &actions, &attr, cargs, environ)
        guard rc == 0 else { throw Failure(description: "cannot start \(argv[0]): \(String(cString: strerror(rc)))") }
        return pid
    }

    /// Waits for `pid` and returns its exit status (128 + signal if killed).
    public static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }

    /// Runs `argv` to completion; throws if it fails.
    public static func run(_ argv: [String]) throws {
        let status = wait(try start(argv))
        guard status == 0 else { throw Failure(description: "\(argv.joined(separator: " ")) exited with status \(status)") }
    }

    /// Runs `argv` and returns its standard output (for facts such as the server version).
    public static func output(_ argv: [String]) -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = argv
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch { return "" }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}

/// What `/proc` says about a process (the daemon).
public enum ProcStats {
    /// Resident memory (`VmRSS` of /proc/PID/status), bytes.
    public static func residentBytes(_ pid: Int32) -> Int? { residentMemory(pid)?.total }

    /// A process's resident memory split by what backs it (`/proc/PID/status`), bytes.
    public struct ResidentMemory: Sendable {
        /// `VmRSS`: all of it.
        public var total: Int
        /// `RssAnon`: the heap, stacks and other private memory the process wrote.
        public var anonymous: Int
        /// `RssFile` + `RssShmem`: pages of mapped files (the executable and its libraries' code
        /// and read-only data), shared with every other process that maps them.
        public var files: Int
    }

    /// Resident memory and what backs it; nil if the process is gone.
    public static func residentMemory(_ pid: Int32) -> ResidentMemory? {
        guard let text = readWhole("/proc/\(pid)/status") else { return nil }
        var kb: [Substring: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if parts.count >= 2, let v = Int(parts[1]) { kb[parts[0]] = v }
        }
        guard let total = kb["VmRSS:"] else { return nil }
        return ResidentMemory(total: total * 1024, anonymous: (kb["RssAnon:"] ?? 0) * 1024,
                              files: ((kb["RssFile:"] ?? 0) + (kb["RssShmem:"] ?? 0)) * 1024)
    }

    /// The files mapped into the process with the most resident bytes (`/proc/PID/smaps`), largest
    /// first: which libraries' pages make up `ResidentMemory.files`.
    public static func largestMappedFiles(_ pid: Int32, count: Int) -> [(file: String, bytes: Int)] {
        guard let text = readWhole("/proc/\(pid)/smaps") else { return [] }
        var byFile: [String: Int] = [:]
        var current: String?
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = parts.first, first.contains("-"), !first.hasSuffix(":") {
                // A mapping's header: address perms offset dev inode [path].
                current = parts.count >= 6 && parts[5].hasPrefix("/") ? String(parts[5]) : nil
            } else if parts.first == "Rss:", let file = current, parts.count >= 2, let kb = Int(parts[1]) {
                byFile[file, default: 0] += kb * 1024
            }
        }
        return byFile.sorted { $0.value > $1.value }.prefix(count).map { (file: $0.key, bytes: $0.value) }
    }

    /// A /proc file read to its end (its size says 0, and one read returns a page at most).
    static func readWhole(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// CPU time used so far, user + system (`utime` + `stime` of /proc/PID/stat), seconds.
    public static func cpuSeconds(_ pid: Int32) -> Double? {
        cpuTimes(pid).map { $0.user + $0.system }
    }

    /// CPU time used so far in user space and in the kernel for the process (`utime` and `stime`
    /// of /proc/PID/stat), seconds; counted in clock ticks (10 ms here), so a difference is only
    /// as good as a second or so of work.
    public static func cpuTimes(_ pid: Int32) -> (user: Double, system: Double)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces): state is field 3; utime 14, stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
        let tick = Double(sysconf(Int32(_SC_CLK_TCK)))
        return (utime / tick, stime / tick)
    }

    /// Context switches (voluntary + involuntary) of each of the process's threads, by thread id,
    /// with the thread's name: each is a wake-up or a preemption, so a thread that never wakes keeps
    /// its count.
    public static func contextSwitches(_ pid: Int32) -> [Int: (name: String, count: Int)] {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return [:] }
        var out: [Int: (name: String, count: Int)] = [:]
        for t in tasks {
            guard let tid = Int(t), let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/status", encoding: .utf8) else { continue }
            let name = ((try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/comm", encoding: .utf8)) ?? "?")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            var count = 0
            for line in text.split(separator: "\n") where line.contains("ctxt_switches:") {
                count += line.split(separator: "\t").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0
            }
            out[tid] = (name, count)
        }
        return out
    }

    /// Wake-ups between two ``contextSwitches(_:)`` readings: per thread name, of the threads alive
    /// at both; and the number of threads that started and ended in between.
    public static func wakeups(_ before: [Int: (name: String, count: Int)], _ after: [Int: (name: String, count: Int)])
        -> (byThread: [(name: String, switches: Int)], started: Int, ended: Int) {
        let both = Set(before.keys).intersection(after.keys)
        var byName: [String: Int] = [:]
        for tid in both { byName[after[tid]!.name, default: 0] += after[tid]!.count - before[tid]!.count }
        return (byName.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, after.count - both.count, before.count - both.count)
    }

    /// Number of threads.
    public static func threads(_ pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"))?.count
    }
}
