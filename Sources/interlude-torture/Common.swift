import Foundation
import InterludeClient
import InterludeMeasure
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// Everything a row needs: where the binaries are, a private work folder, the project root (its
/// `Sounds/` and `Scripts/`), the audio server of the run, and the sizes of the rows.
struct TortureContext: Sendable {
    var bin: String
    var work: String
    var root: String
    var pulseServer: String
    var restarts = 20
    var kills = 50
    var clients = 500
    var requests = 100
    var slowConsumers = 10
}

func log(_ s: String) {
    FileHandle.standardError.write(Data("interlude-torture: \(s)\n".utf8))
}

/// The user's tool: acts on every app's notifications, settings and focus (PROTOCOL.md "Who acts").
let userTool = "org.interlude.CLI"

/// One `interluded` started by the suite as its own child, so that its exit status is known: a
/// daemon that ends other than by the suite's SIGKILL or SIGTERM crashed.
final class DaemonProcess: @unchecked Sendable {
    let bin: String
    let socket: String
    let state: String
    let config: String
    let pulseServer: String
    let logs: String
    private(set) var pid: pid_t = 0
    private(set) var starts = 0
    /// Ends the suite did not cause (`ExitStatus.isCrash`), with the log file of that run.
    private(set) var crashes: [String] = []
    private var ended: ExitStatus?

    /// - Parameters: a folder for this daemon's socket, state (kept across restarts), logs; the config
    ///   folder (`--config`).
    init(bin: String, folder: String, config: String, pulseServer: String) {
        self.bin = bin
        socket = folder + "/socket"
        state = folder + "/state"
        logs = folder + "/logs"
        self.config = config
        self.pulseServer = pulseServer
        try? FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
    }

    var logPath: String { logs + "/interluded.\(starts).log" }

    /// Starts the daemon and waits until it answers `hello` (at most `timeout` s).
    /// - Returns: seconds from the spawn until it answered.
    /// - Throws: when it exits or does not answer in time (the exit is recorded as a crash).
    @discardableResult
    func start(timeout: Double = 15) async throws -> Double {
        starts += 1
        ended = nil
        let t0 = now()
        pid = try Spawn.start([bin + "/interluded", "--socket", socket, "--state", state, "--config", config,
                               "--pulse-server", pulseServer, "--exit-with-parent"], stderrPath: logPath)
        while now() - t0 < timeout {
            if let status = exitStatus() {
                crashes.append("daemon exited at start: \(status) (log \(logPath))")
                throw Spawn.Failure(description: "interluded exited at start: \(status); log \(logPath)")
            }
            if let c = try? await InterludeClient.connect(socket: socket, app: userTool, replyTimeout: 2) {
                c.close()
                return now() - t0
            }
            await sleep(0.02)
        }
        throw Spawn.Failure(description: "interluded did not answer within \(timeout) s; log \(logPath)")
    }

    /// The exit status if the daemon has ended (reaped once), nil while it runs.
    func exitStatus() -> ExitStatus? {
        if let ended { return ended }
        guard pid > 0 else { return nil }
        var raw: Int32 = 0
        let r = waitpid(pid, &raw, WNOHANG)
        guard r == pid, let s = ExitStatus(raw: raw) else { return nil }
        ended = s
        return s
    }

    /// True while it runs; a daemon found dead is recorded as a crash once.
    func checkAlive(_ during: String) -> Bool {
        guard let s = exitStatus() else { return true }
        let line = "daemon died \(during): \(s) (log \(logPath))"
        if !crashes.contains(line) { crashes.append(line) }
        return false
    }

    private func waitEnd(timeout: Double) -> ExitStatus? {
        let t0 = now()
        while now() - t0 < timeout {
            if let s = exitStatus() { return s }
            usleep(10_000)
        }
        return nil
    }

    /// SIGKILL (the suite's own fault). A daemon already dead before it is a crash.
    func kill9() {
        guard checkAlive("before the suite's SIGKILL") else { return }
        Glibc.kill(pid, SIGKILL)
        if let s = waitEnd(timeout: 10), s.isCrash(expected: .killed) {
            crashes.append("daemon ended \(s) after SIGKILL (log \(logPath))")
        }
    }

    /// SIGTERM and wait: a clean stop exits 0 within 10 s (else SIGKILL, and that is recorded).
    func stop() {
        guard checkAlive("before the suite stopped it") else { return }
        Glibc.kill(pid, SIGTERM)
        guard let s = waitEnd(timeout: 10) else {
            crashes.append("daemon did not stop within 10 s of SIGTERM (log \(logPath))")
            Glibc.kill(pid, SIGKILL)
            _ = waitEnd(timeout: 5)
            return
        }
        if s.isCrash(expected: .terminated) { crashes.append("daemon ended \(s) after SIGTERM (log \(logPath))") }
    }

    /// Resident memory now (VmRSS), bytes.
    var residentBytes: Int? { ProcStats.residentBytes(pid) }
}

/// Writes `interlude.json5` into a new folder `dir` and returns the folder.
func writeConfig(_ dir: String, _ json5: String) throws -> String {
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    try json5.write(toFile: dir + "/interlude.json5", atomically: true, encoding: .utf8)
    return dir
}

/// The books of a set of timed requests: latencies of the answered ones, error codes of the
/// refused ones, and the ones never answered (lost: the connection closed or the reply timed out).
struct RequestBook: Sendable {
    var latencies: [Double] = []
    /// The same latencies by method, to say which calls are the slow ones.
    var byMethod: [String: [Double]] = [:]
    var codes: [String: Int] = [:]
    var unanswered = 0
    /// Requests never sent because the row's deadline had passed (the daemon was too slow).
    var notSent = 0
    var unansweredExamples: [String] = []

    /// The `count` methods with the highest median latency: "name p50/p99 ms", slowest first.
    func slowestMethods(_ count: Int) -> String {
        byMethod.map { ($0.key, Stats($0.value)) }
            .sorted { ($0.1.median ?? 0) > ($1.1.median ?? 0) }
            .prefix(count)
            .map { "\($0.0) \(String(format: "%.0f/%.0f", ($0.1.median ?? 0) * 1000, ($0.1.quantile(0.99) ?? 0) * 1000))" }
            .joined(separator: ", ")
    }

    mutating func merge(_ o: RequestBook) {
        latencies += o.latencies
        for (k, v) in o.byMethod { byMethod[k, default: []] += v }
        for (k, v) in o.codes { codes[k, default: 0] += v }
        unanswered += o.unanswered
        notSent += o.notSent
        unansweredExamples += o.unansweredExamples.prefix(max(0, 3 - unansweredExamples.count))
    }

    /// Times `body`: a result or a ``WireError`` is an answer; anything else is unanswered.
    mutating func time(_ what: String, _ body: () async throws -> Void) async {
        let t0 = now()
        do {
            try await body()
            latencies.append(now() - t0)
            byMethod[what, default: []].append(now() - t0)
        } catch let e as WireError {
            latencies.append(now() - t0)
            byMethod[what, default: []].append(now() - t0)
            codes[e.code.rawValue, default: 0] += 1
        } catch {
            unanswered += 1
            if unansweredExamples.count < 3 { unansweredExamples.append("\(what): \(error)") }
        }
    }

    var answered: Int { latencies.count }
}

func ms(_ s: Double?) -> String {
    guard let s else { return "–" }
    return s < 0.01 ? String(format: "%.1f ms", s * 1000) : String(format: "%.0f ms", s * 1000)
}

func mb(_ b: Int?) -> String { b.map { String(format: "%.0f MB", Double($0) / 1_048_576) } ?? "–" }

func db(_ d: Double) -> String { String(format: "%+.1f dB", d) }

/// Samples a process's resident memory every 0.2 s while a row runs; `peak` is the largest seen.
final class RSSSampler: @unchecked Sendable {
    private let lock = NSLock()
    private var peakBytes = 0
    private var task: Task<Void, Never>?

    init(pid: pid_t) {
        task = Task.detached { [weak self] in
            while !Task.isCancelled {
                if let r = ProcStats.residentBytes(pid) { self?.lock.withLock { self?.peakBytes = max(self?.peakBytes ?? 0, r) } }
                try? await Task.sleep(nanoseconds: 200_000_000)
            }
        }
    }

    var peak: Int { lock.withLock { peakBytes } }
    func stop() { task?.cancel() }
}

/// The `status` latency seen by a bystander client every `interval` s while a row runs: the daemon
/// is responsive when every status is answered, quickly.
final class Bystander: @unchecked Sendable {
    private let lock = NSLock()
    private var book = RequestBook()
    private var task: Task<Void, Never>?
    private var phase = 0
    private var byPhase: [Int: [Double]] = [:]

    init(socket: String, app: String, interval: Double) async throws {
        let c = try await InterludeClient.connect(socket: socket, app: app, replyTimeout: 30)
        task = Task.detached { [weak self] in
            while !Task.isCancelled {
                var b = RequestBook()
                await b.time("status") { _ = try await c.status() }
                guard let self else { break }
                self.lock.withLock {
                    if let l = b.latencies.last { self.byPhase[self.phase, default: []].append(l) }
                    self.book.merge(b)
                }
                if b.unanswered > 0 { break }
                try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
            }
            c.close()
        }
    }

    /// Latencies from now on are kept apart (phase n).
    func setPhase(_ n: Int) { lock.withLock { phase = n } }
    func latencies(phase n: Int) -> Stats { lock.withLock { Stats(byPhase[n] ?? []) } }
    var result: RequestBook { lock.withLock { book } }
    func stop() async {
        task?.cancel()
        await task?.value
    }
}
