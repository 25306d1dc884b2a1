import Foundation
import InterludeMeasure
import InterludeClient
import InterludeConfig
import InterludePolicy
import InterludePulse

/// `interlude-bench`: measures a running `interluded` and PulseAudio server and prints Markdown
/// tables (README "Benchmarks"). Run by `Scripts/bench`, which builds, starts a daemon and passes
/// its socket and pid.
enum Bench {
    static let usage = """
    usage: interlude-bench --daemon-pid PID [--socket PATH] [--cli PATH] [--runs N] [--arbitration-runs N] [--activation-runs N]
                           [--idle-seconds S] [--only onset,duck,arbitration,center,throughput,remote,resources] [--build TEXT]
                           [--remote-broker URL --remote-dir DIR --remote-daemon PATH [--remote-backlog N]]

    Measures a running interluded (socket: --socket, else $INTERLUDE_SOCKET, else the default) on the
    PulseAudio server of $PULSE_SERVER, recording the default sink's monitor, and prints Markdown.
      --daemon-pid PID        the daemon's pid, for /proc (memory, CPU); without it those are skipped
      --cli PATH              the interlude CLI to time (default .build/release/interlude)
      --runs N                onset and duck runs (default 31)
      --arbitration-runs N    timed activations per session count (default 50)
      --activation-runs N     session.activate rounds idle and during the notification burst (default 200)
      --idle-seconds S        idle time over which the daemon's CPU is measured (default 60)
      --build TEXT            how the binaries were built, for the header
      --remote-broker URL     a broker from Scripts/mosquitto-private (its folder: --remote-dir) for the
                              remote-notification rows; the bench runs its own daemon (--remote-daemon)
      --remote-backlog N      messages pushed while that daemon is stopped (default 10000)
      --commit-dir DIR        where to measure one-row SQLite commits (the daemon's state file system;
                              default the temporary folder)
      --throughput-rows LIST  only these throughput rows, e.g. 8x16x1000 (clients x in flight x requests
                              each; with L, e.g. 8x16x1000L, through the client library)
      --no-activation-burst   without the session.activate rows (idle and during a burst)
    """

    static func log(_ s: String) { FileHandle.standardError.write(Data("interlude-bench: \(s)\n".utf8)) }

    struct Options {
        var socket: String
        var daemonPID: Int32?
        var cli = ".build/release/interlude"
        var runs = 31
        var arbitrationRuns = 50
        /// `session.activate` rounds idle and during the burst (each 5 ms apart).
        var activationRuns = 200
        var idleSeconds = 60.0
        var sections: Set<String> = ["onset", "duck", "arbitration", "center", "throughput", "remote", "resources"]
        var build = "?"
        var sound = "Sounds/default.wav"
        var sample = "interlude-bench-default"
        var remoteBroker: String?
        var remoteDir: String?
        var remoteDaemon: String?
        var remoteBacklog = 10000
        /// Where the one-row SQLite commit rate is measured: the file system of the daemon's state.
        var commitDirectory = NSTemporaryDirectory()
        /// Throughput rows: clients, requests in flight per client, requests per client, and whether
        /// the clients are the client library's (``InterludeClient``) instead of raw load clients.
        var throughputRows = [(1, 16, 2000, false), (8, 16, 1000, false), (64, 16, 150, false), (1, 1, 1000, false), (8, 16, 1000, true)]
        /// Whether the throughput section also times `session.activate` during a burst.
        var activationDuringBurst = true
    }

    static func parse(_ argv: [String]) throws -> Options {
        var o = Options(socket: InterludeClient.defaultSocketPath(environment: ProcessInfo.processInfo.environment))
        var i = 0
        func value() throws -> String {
            guard i + 1 < argv.count else { throw Spawn.Failure(description: "\(argv[i]) needs a value") }
            i += 1
            return argv[i]
        }
        func number(_ s: String) throws -> Double {
            guard let d = Double(s), d.isFinite, d >= 0 else { throw Spawn.Failure(description: "not a number: \(s)") }
            return d
        }
        while i < argv.count {
            switch argv[i] {
            case "--socket": o.socket = try value()
            case "--daemon-pid": o.daemonPID = Int32(try number(try value()))
            case "--cli": o.cli = try value()
            case "--runs": o.runs = max(1, Int(try number(try value())))
            case "--arbitration-runs": o.arbitrationRuns = max(1, Int(try number(try value())))
            case "--activation-runs": o.activationRuns = max(1, Int(try number(try value())))
            case "--idle-seconds": o.idleSeconds = try number(try value())
            case "--only": o.sections = Set(try value().split(separator: ",").map(String.init))
            case "--build": o.build = try value()
            case "--sound": o.sound = try value()
            case "--sample": o.sample = try value()
            case "--remote-broker": o.remoteBroker = try value()
            case "--remote-dir": o.remoteDir = try value()
            case "--remote-daemon": o.remoteDaemon = try value()
            case "--remote-backlog": o.remoteBacklog = max(1, Int(try number(try value())))
            case "--commit-dir": o.commitDirectory = try value()
            case "--throughput-rows":
                o.throughputRows = try value().split(separator: ",").map {
                    let library = $0.hasSuffix("L")
                    let n = $0.dropLast(library ? 1 : 0).split(separator: "x").compactMap { Int($0) }
                    guard n.count == 3, n.allSatisfy({ $0 > 0 }) else { throw Spawn.Failure(description: "--throughput-rows: CLIENTSxINFLIGHTxREQUESTS[L],…") }
                    return (n[0], n[1], n[2], library)
                }
            case "--no-activation-burst": o.activationDuringBurst = false
            case "--help", "-h": print(usage); exit(0)
            default: throw Spawn.Failure(description: "unknown argument \(argv[i])\n\(usage)")
            }
            i += 1
        }
        return o
    }

    static func run(_ argv: [String]) async -> Int32 {
        do {
            let o = try parse(argv)
            let report = try await measure(o)
            print(report)
            return 0
        } catch {
            log("\(error)")
            return 1
        }
    }

    // MARK: Measuring

    static func measure(_ o: Options) async throws -> String {
        // The CLI is run as a user runs it: `interlude play default`, the socket from the environment.
        setenv("INTERLUDE_SOCKET", o.socket, 1)
        let cwd = FileManager.default.currentDirectoryPath
        let sound = o.sound.hasPrefix("/") ? o.sound : cwd + "/" + o.sound
        let config = try ConfigLoader.load(folders: ConfigLoader.folders(
            builtin: cwd + "/Config", override: nil, environment: ProcessInfo.processInfo.environment))
        let policy = config.audioPolicy

        var out: [String] = []
        let facts = MachineFacts.read()
        out.append("Machine: \(facts.cpus) × \(facts.cpu), Linux \(facts.kernel), \(facts.memory) RAM; PulseAudio \(facts.pulse) "
                   + "(\(facts.sink)); \(o.build); \(facts.date).")
        let loadStart = loadAverage()
        let residentFresh = o.daemonPID.flatMap { ProcStats.residentMemory($0) }
        let filesFresh = o.daemonPID.map { ProcStats.largestMappedFiles($0, count: 6) } ?? []

        let pulse = PulseConnection(clientName: "interlude-bench", properties: ["application.id": "org.interlude.Bench"])
        try pulse.connect(timeout: 5)
        defer { pulse.disconnect() }
        let monitorSource = try pulse.defaultSinkName() + ".monitor"

        if o.sections.contains("onset") {
            try Spawn.run(["pactl", "upload-sample", sound, o.sample])
            defer { try? Spawn.run(["pactl", "remove-sample", o.sample]) }
            let monitor = try Monitor(pulse: pulse, source: monitorSource)
            defer { monitor.stop() }
            await sleep(2.5)  // the recorder's start-time estimate settles over its first 2 s
            let bench = OnsetBench(monitor: monitor, pulse: pulse, socket: o.socket, cli: o.cli, soundFile: sound,
                                   sampleName: o.sample, soundSeconds: 1.2, log: log)
            let methods: [OnsetBench.Method] = [.cli, .libraryConnected, .libraryNewConnection, .pactl, .paplay, .inProcess]
            let r = try await bench.run(runs: o.runs, methods: methods)
            log("onset: start-up only")
            let cliStart = try OnsetBench.startupOnly([o.cli, "help"], runs: o.runs)
            let pactlStart = try OnsetBench.startupOnly(["pactl", "--version"], runs: o.runs)
            out.append(onsetTable(r, methods: methods, runs: o.runs, cliStart: cliStart, pactlStart: pactlStart))
        }

        if o.sections.contains("duck") {
            let monitor = try Monitor(pulse: pulse, source: monitorSource)
            defer { monitor.stop() }
            await sleep(2.5)
            let bench = DuckBench(monitor: monitor, pulse: pulse, socket: o.socket, levelDb: policy.duckLevelDb,
                                  rampDown: policy.duckRampDown, rampUp: policy.duckRampUp, log: log)
            out.append(duckTable(try await bench.run(runs: o.runs), policy: policy))
        }

        var residentWith1000: ProcStats.ResidentMemory?
        if o.sections.contains("arbitration") {
            let bench = ArbitrationBench(socket: o.socket, config: policy, log: log)
            var rows: [(Int, ArbitrationBench.DaemonResult, ArbitrationBench.PureResult)] = []
            for n in [10, 100, 1000] {
                log("arbitration: \(n) sessions")
                let d = try await bench.daemon(sessions: n, runs: o.arbitrationRuns, daemonPID: o.daemonPID)
                if n == 1000 { residentWith1000 = d.residentWithSessions }
                await sleep(0.5)  // the daemon releases the sessions (A9)
                rows.append((n, d, bench.pure(sessions: n, runs: max(200, o.arbitrationRuns))))
            }
            out.append(arbitrationTable(rows, runs: o.arbitrationRuns, pureRuns: max(200, o.arbitrationRuns)))
            log("arbitration: the pure policy at 10…10,000 sessions")
            let pure = [10, 100, 1000, 10000].map { ($0, bench.pure(sessions: $0, runs: max(200, o.arbitrationRuns))) }
            out.append(pureArbitrationTable(pure, runs: max(200, o.arbitrationRuns)))
            log("arbitration: the pure policy with 10…10,000 sessions all active")
            let active = [10, 100, 1000, 10000].map { ($0, bench.pureActive(sessions: $0, runs: max(200, o.arbitrationRuns))) }
            out.append(activeArbitrationTable(active, runs: max(200, o.arbitrationRuns)))
        }

        if o.sections.contains("center") {
            let bench = CenterBench(directory: o.commitDirectory, log: log)
            var rows: [CenterBench.Result] = []
            for (n, apps) in [(0, 100), (1000, 100), (10000, 100), (60000, 100), (1000, 10000)] {
                log("center: an add with \(n) notifications of \(apps) apps in the center")
                rows.append(try bench.run(delivered: n, apps: apps, runs: 200))
            }
            out.append(centerTable(rows, runs: 200))
        }

        if o.sections.contains("throughput") {
            let bench = ThroughputBench(socket: o.socket, daemonPID: o.daemonPID, log: log)
            var rows: [ThroughputBench.Result] = []
            for (clients, inFlight, each, library) in o.throughputRows {
                log("throughput: \(clients) client(s), \(inFlight) in flight each\(library ? ", through the client library" : "")")
                do {
                    rows.append(try await bench.run(clients: clients, inFlight: inFlight, requestsPerClient: each, library: library))
                } catch {
                    // A daemon too slow for the row (a reply later than the client's 30 s) gets a row saying so.
                    log("throughput: \(error)")
                    rows.append(.init(label: "\(clients) client(s), \(inFlight) in flight each: \(error)", requests: clients * each,
                                      seconds: .nan, latency: Stats([])))
                    await sleep(30)  // let the daemon work off what is queued
                }
            }
            log("throughput: one-row SQLite commits in \(o.commitDirectory)")
            let commitRate = try? ThroughputBench.sqliteCommitRate(directory: o.commitDirectory)
            let shapedCommitRate = try? ThroughputBench.sqliteCommitRate(directory: o.commitDirectory, daemonShape: true)
            log("throughput: one waiting client's focus.status, the floor")
            let floor = try? await bench.floorRate(count: 2000)
            log("throughput: session.activate idle and during an 8-client burst")
            let activation = !o.activationDuringBurst ? nil : await { () async -> (idle: Stats, idleBackToBack: Stats, duringBurst: Stats, burstRate: Double, underCPULoad: Stats, spinThreads: Int)? in
                do { return try await bench.activation(runs: o.activationRuns) } catch {
                    log("throughput: session.activate during a burst: \(error)")
                    return nil
                }
            }()
            out.append(ThroughputBench.table(rows, commitRate: commitRate, shapedCommitRate: shapedCommitRate, floorRate: floor?.rate,
                                             floorCPU: floor?.daemonCPU, activation: activation))
        }

        if o.sections.contains("remote"), let broker = o.remoteBroker, let dir = o.remoteDir, let daemon = o.remoteDaemon {
            let bench = RemoteBench(broker: broker, brokerDir: dir, daemon: daemon, log: log)
            out.append(RemoteBench.table(try await bench.run(rounds: o.runs, backlog: o.remoteBacklog)))
        }

        if o.sections.contains("resources"), let pid = o.daemonPID {
            // Idle means nothing left to do: first let deferred work run out (timers of the A9 expiry,
            // 10 s, that the arbitration runs armed and cancelled, and idle worker threads exiting).
            log("resources: settling for 15 s, then idle for \(Int(o.idleSeconds)) s")
            await sleep(15)
            let rssIdle = ProcStats.residentMemory(pid)
            let cpu0 = ProcStats.cpuSeconds(pid), cs0 = ProcStats.contextSwitches(pid)
            await sleep(o.idleSeconds)
            let cpu1 = ProcStats.cpuSeconds(pid), cs1 = ProcStats.contextSwitches(pid)
            out.append(resourceTable(fresh: residentFresh, with1000: residentWith1000, idleAfter: rssIdle, filesFresh: filesFresh,
                                     cpu: zip2(cpu0, cpu1).map { $1 - $0 }, wakeups: ProcStats.wakeups(cs0, cs1),
                                     seconds: o.idleSeconds, threads: cs1.count))
        }
        out.append("Load average (1 min) at the start \(loadStart), at the end \(loadAverage()): other work on the machine "
                   + "adds noise to every number above.")
        return out.joined(separator: "\n\n")
    }

    static func zip2<A, B>(_ a: A?, _ b: B?) -> (A, B)? {
        guard let a, let b else { return nil }
        return (a, b)
    }

    // MARK: Tables

    static func onsetTable(_ r: OnsetBench.Result, methods: [OnsetBench.Method], runs: Int,
                           cliStart: Stats, pactlStart: Stats) -> String {
        let referenceOnsets = r.trials[.pactl, default: []].compactMap(\.onset)
        let reference = Stats(referenceOnsets).median
        var lines = [
            "**Sound onset**: request → first audible sample (> −40 dBFS) at the sink's monitor; median of \(runs) "
            + "rounds (methods interleaved, each request at a random phase of the sink's mixing blocks), 10th–90th "
            + "percentile, the ratio of medians to `pactl play-sample` with its 95 % bootstrap interval, and when the "
            + "command exited or the request returned.",
            "",
            "| what | onset (median) | p10–p90 | vs `pactl play-sample` | 95 % interval | returned (median) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for m in methods {
            let trials = r.trials[m, default: []]
            let onsets = Stats(trials.compactMap(\.onset))
            let missing = trials.count - onsets.count
            let ratio = zip2(onsets.median, reference).map { String(format: "%.2f×", $0 / $1) } ?? "–"
            let interval = m == .pactl ? "" : bootstrapRatio(onsets.sorted, referenceOnsets)
                .map { String(format: "%.2f–%.2f×", $0.low, $0.high) } ?? "–"
            lines.append("| \(m.label)\(missing > 0 ? " (\(missing) runs without a clean onset)" : "") | \(ms(onsets.median)) | "
                         + "\(ms(onsets.quantile(0.1)))–\(ms(onsets.quantile(0.9))) | \(ratio) | \(interval) | "
                         + "\(ms(Stats(trials.map(\.returned)).median)) |")
        }
        let firstRatio = zip2(r.first.onset, reference).map { String(format: "%.2f×", $0 / $1) } ?? "–"
        lines.append("| first `interlude play default` after the daemon started (1 run) | \(ms(r.first.onset)) | | \(firstRatio) | | \(ms(r.first.returned)) |")
        lines.append("| start-up only: `interlude help` (exits at once) | | | | | \(ms(cliStart.median)) |")
        lines.append("| start-up only: `pactl --version` | | | | | \(ms(pactlStart.median)) |")
        return lines.joined(separator: "\n")
    }

    static func duckTable(_ runs: [DuckBench.Run], policy: AudioPolicyConfig) -> String {
        func row(_ what: String, _ values: [Double?]) -> String {
            let s = Stats(values.compactMap { $0 })
            let missing = values.count - s.count
            return "| \(what)\(missing > 0 ? " (not reached in \(missing) runs)" : "") | \(ms(s.median)) | \(ms(s.quantile(0.1)))–\(ms(s.quantile(0.9))) |"
        }
        let reached = Stats(runs.compactMap(\.reached)).median
        return [
            "**Duck reaction**: a `playback` session plays 440 Hz; a `voicePrompt` session with `duckOthers` is activated "
            + "(`InterludeClient.activate`); the tone stream's volume as the server reports it (sink-input change events "
            + "on the bench's own connection) and the tone's level at the monitor (Goertzel, 20 ms windows every 2 ms, times "
            + "±10 ms). Configured: \(fmtDb(policy.duckLevelDb)) over a \(Int(policy.duckRampDown * 1000)) ms ramp; "
            + "median of \(runs.count) runs.",
            "",
            "| from the activate request to | median | p10–p90 |",
            "|---|---:|---:|",
            row("the server reports the tone stream's volume lowered (the first ramp step applied; target ≤ 10 ms)", runs.map(\.firstStep)),
            row("the tone falls by 0.5 dB at the monitor (ramp under way; the sink's buffer in between)", runs.map(\.fall)),
            row("the tone within 1 dB of \(fmtDb(policy.duckLevelDb)) (≤ \(fmtDb(policy.duckLevelDb + 1)))", runs.map(\.target)),
            row("the activation reply (A11: after the ramp)", runs.map(\.reply)),
            "| configured ramp (`audio.duckRampDownMs`) | \(Int(policy.duckRampDown * 1000)) ms | |",
            "| level reached (0.5–0.85 s after the request) | \(reached.map(fmtDb) ?? "–") | |",
        ].joined(separator: "\n")
    }

    static func fmtDb(_ d: Double) -> String { String(format: "%.1f dB", d).replacingOccurrences(of: "-", with: "−") }

    static func arbitrationTable(_ rows: [(Int, ArbitrationBench.DaemonResult, ArbitrationBench.PureResult)],
                                 runs: Int, pureRuns: Int) -> String {
        var lines = [
            "**Arbitration**: N `playback` sessions registered on one connection, one of them active; activating "
            + "another non-mixable one interrupts it (A1), then it is deactivated (untimed). Round trip of "
            + "`session.activate` over the socket (median of \(runs)) and the same on the pure policy in-process "
            + "(median of \(pureRuns)).",
            "",
            "| sessions | `session.activate` round trip | p10–p90 | `AudioPolicy.reduce` | reduce + `nextDeadline` | registering all N |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for (n, d, p) in rows {
            lines.append("| \(n) | \(us(d.activate.median)) | \(us(d.activate.quantile(0.1)))–\(us(d.activate.quantile(0.9))) | "
                         + "\(us(p.reduce.median)) | \(us(p.reduceAndDeadline.median)) | \(us(d.register)) |")
        }
        return lines.joined(separator: "\n")
    }

    static func pureArbitrationTable(_ rows: [(Int, ArbitrationBench.PureResult)], runs: Int) -> String {
        markdownTable(
            "**Arbitration on the pure policy** (in-process, no socket): the same events as above; `reduce` of the "
            + "activation (median of \(runs)), with `nextDeadline` (what the engine runs per event), and registering "
            + "all N sessions (N `reduce(.register)` events). Targets: ≤ 50 µs at 1,000; registering 1,000 < 50 ms.",
            columns: ["sessions", "`AudioPolicy.reduce`", "reduce + `nextDeadline`", "registering all N"],
            rows: rows.map { n, p in ["\(n)", us(p.reduce.median), us(p.reduceAndDeadline.median), us(p.register)] })
    }

    static func activeArbitrationTable(_ rows: [(Int, ArbitrationBench.ActiveResult)], runs: Int) -> String {
        markdownTable(
            "**Every session active** (pure policy, in-process): N `ambient` sessions registered and activated "
            + "(each event followed by `nextDeadline`, as the engine does), then one more registered, activated and "
            + "unregistered (median per event of \(runs)). An event looks only at the sessions it can change "
            + "(the state's indexes): the same per event at any N, all N activated in time linear in N. "
            + "Before the indexes (2026-12-05, 07:17 UTC): 11 µs, 89 µs, 0.8 ms and 7.4 ms per event.",
            columns: ["sessions, all active", "per event", "p90", "registering and activating all N"],
            rows: rows.map { n, r in ["\(n)", us(r.perEvent.median), us(r.perEvent.quantile(0.9)), us(r.activateAll)] })
    }

    /// A paragraph, then a Markdown table of right-aligned columns.
    static func markdownTable(_ intro: String, columns: [String], rows: [[String]]) -> String {
        let lines = [intro, "", "| " + columns.joined(separator: " | ") + " |",
                     "|" + String(repeating: "---:|", count: columns.count)]
            + rows.map { "| " + $0.joined(separator: " | ") + " |" }
        return lines.joined(separator: "\n")
    }

    static func centerTable(_ rows: [CenterBench.Result], runs: Int) -> String {
        var lines = [
            "**An add as the center fills** (in-process, no socket): the center holds N delivered notifications of 100 "
            + "apps (the last row: of 10,000 apps, each with its record) and is full (`maxDeliveredTotal` = N, so each add also drops the oldest, N11; "
            + "for N = 0 the limit is 1, and each add drops the one before); one more add, median of "
            + "\(runs): the policy's decision (`NotificationPolicy.reduce`), the engine's check that the state changed "
            + "(`NotificationState ==`), and `NotificationStore.save` (the row diff and one SQLite commit, WAL, "
            + "`synchronous=FULL`). N = 1,000 is the default limit; beyond it the limits were raised.",
            "",
            "| in the center | apps known | `reduce` of the add | p90 | state changed? | `save` (diff + commit) | p90 | rows written |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows {
            lines.append("| \(r.delivered) | \(r.apps) | \(us(r.reduce.median)) | \(us(r.reduce.quantile(0.9))) | \(us(r.compare.median)) | "
                         + "\(us(r.save.median)) | \(us(r.save.quantile(0.9))) | \(r.rowsPerSave) |")
        }
        return lines.joined(separator: "\n")
    }

    static func resourceTable(fresh: ProcStats.ResidentMemory?, with1000: ProcStats.ResidentMemory?, idleAfter: ProcStats.ResidentMemory?,
                              filesFresh: [(file: String, bytes: Int)], cpu: Double?,
                              wakeups: (byThread: [(name: String, switches: Int)], started: Int, ended: Int), seconds: Double,
                              threads: Int) -> String {
        let total = wakeups.byThread.reduce(0) { $0 + $1.switches }
        let busy = wakeups.byThread.filter { $0.switches > 0 }.map { "`\($0.name)` \($0.switches)" }.joined(separator: ", ")
        func mb(_ b: Int) -> String { String(format: "%.1f MB", Double(b) / 1_048_576) }
        func row(_ m: ProcStats.ResidentMemory?) -> String {
            m.map { "\(mb($0.total)) | \(mb($0.anonymous)) | \(mb($0.files))" } ?? "– | – | –"
        }
        let files = filesFresh.map { "`\(($0.file as NSString).lastPathComponent)` \(mb($0.bytes))" }.joined(separator: ", ")
        return [
            "**Daemon resources** (`/proc/PID/status` VmRSS, split into RssAnon (heap, stacks) and RssFile "
            + "(pages of the executable and the libraries, shared with other processes that map them); "
            + "`/proc/PID/stat` utime + stime, in 10 ms ticks; context switches of all its threads):",
            "",
            "| | resident | of it anonymous | of it mapped files |",
            "|---|---:|---:|---:|",
            "| memory, idle (just started) | \(row(fresh)) |",
            "| memory, 1000 sessions registered | \(row(with1000)) |",
            "| memory, idle after the bench | \(row(idleAfter)) |",
            "",
            "| | |",
            "|---|---:|",
            "| CPU time over \(Int(seconds)) s idle | \(cpu.map { String(format: "%.0f ms", $0 * 1000) } ?? "–") |",
            "| context switches (wake-ups) over \(Int(seconds)) s idle, all \(threads) threads | \(total)\(busy.isEmpty ? "" : " (\(busy))") |",
            "| threads started / ended over \(Int(seconds)) s idle | \(wakeups.started) / \(wakeups.ended) |",
            "",
            "Largest mapped files, idle (just started): \(files.isEmpty ? "–" : files).",
        ].joined(separator: "\n")
    }
}
