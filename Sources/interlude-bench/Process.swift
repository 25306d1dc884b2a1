import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Spawns commands with `posix_spawnp` (less work in the parent than Foundation's `Process`, so the
/// time measured is the command's own), stdin and stdout on /dev/null, stderr inherited.
enum Spawn {
    struct Failure: Error, CustomStringConvertible { var description: String }

    /// Starts `argv` (looked up on PATH) and returns its pid. Signals start unblocked and at their
    /// defaults in the child (a thread of ours may have some blocked).
    static func start(_ argv: [String], stderr: String? = nil) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        if let stderr { posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o600) }
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
    static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }

    /// Runs `argv` to completion; throws if it fails.
    static func run(_ argv: [String]) throws {
        let status = wait(try start(argv))
        guard status == 0 else { throw Failure(description: "\(argv.joined(separator: " ")) exited with status \(status)") }
    }

    /// Runs `argv` and returns its standard output (for facts such as the server version).
    static func output(_ argv: [String]) -> String {
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
enum ProcStats {
    /// Resident memory (`VmRSS` of /proc/PID/status), bytes.
    static func residentBytes(_ pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kb = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }
            return kb.map { $0 * 1024 }
        }
        return nil
    }

    /// CPU time used so far, user + system (`utime` + `stime` of /proc/PID/stat), seconds.
    static func cpuSeconds(_ pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces): state is field 3; utime 14, stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
        return (utime + stime) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Context switches (voluntary + involuntary) of each of the process's threads, by thread id,
    /// with the thread's name: each is a wake-up or a preemption, so a thread that never wakes keeps
    /// its count.
    static func contextSwitches(_ pid: Int32) -> [Int: (name: String, count: Int)] {
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
    static func wakeups(_ before: [Int: (name: String, count: Int)], _ after: [Int: (name: String, count: Int)])
        -> (byThread: [(name: String, switches: Int)], started: Int, ended: Int) {
        let both = Set(before.keys).intersection(after.keys)
        var byName: [String: Int] = [:]
        for tid in both { byName[after[tid]!.name, default: 0] += after[tid]!.count - before[tid]!.count }
        return (byName.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, after.count - both.count, before.count - both.count)
    }

    /// Number of threads.
    static func threads(_ pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"))?.count
    }
}
