import Foundation
import InterludeMeasure
#if canImport(Glibc)
import Glibc
#endif

/// `interlude-torture`: the bounded torture suite (README "Torture"), run by `Scripts/torture`.
/// Every row starts its own daemon (a child of this process, so its exit status is known) on a
/// private socket and state folder; every loop is bounded in count and time. Prints one Markdown
/// table and exits 1 if anything was lost, duplicated, stuck, or a daemon crashed.
enum Torture {
    static let usage = """
    usage: interlude-torture --bin DIR --work DIR --pulse-server SERVER [--root DIR] [--only ROWS]
                             [--restarts N] [--kills N] [--clients N] [--requests N] [--slow N]

      --bin DIR             where interluded and interlude are (a release build)
      --work DIR            a private folder for sockets, state, logs and bad files
      --pulse-server S      the private audio server of the run (rows other than the restarts)
      --root DIR            the project (Scripts/pulse-private, Sounds/); default: the current folder
      --only ROWS           a comma list of restart,kill,clients,slow,files (default all)
    """

    static func run(_ argv: [String]) async -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        var bin: String?, work: String?, pulse: String?
        var root = FileManager.default.currentDirectoryPath
        var only: Set<String> = ["restart", "kill", "clients", "slow", "files"]
        var sizes: [String: Int] = [:]
        var i = 0
        while i < argv.count {
            let a = argv[i]
            guard i + 1 < argv.count else { log("\(a) needs a value\n\(usage)"); return 2 }
            let v = argv[i + 1]
            switch a {
            case "--bin": bin = v
            case "--work": work = v
            case "--pulse-server": pulse = v
            case "--root": root = v
            case "--only": only = Set(v.split(separator: ",").map(String.init))
            case "--restarts", "--kills", "--clients", "--requests", "--slow":
                guard let n = Int(v), n > 0, n <= 100_000 else { log("\(a): not a count: \(v)"); return 2 }
                sizes[a] = n
            default: log("unknown argument \(a)\n\(usage)"); return 2
            }
            i += 2
        }
        guard let bin, let work, let pulse else { log(usage); return 2 }
        var ctx = TortureContext(bin: bin, work: work, root: root, pulseServer: pulse)
        ctx.restarts = sizes["--restarts"] ?? ctx.restarts
        ctx.kills = sizes["--kills"] ?? ctx.kills
        ctx.clients = sizes["--clients"] ?? ctx.clients
        ctx.requests = sizes["--requests"] ?? ctx.requests
        ctx.slowConsumers = sizes["--slow"] ?? ctx.slowConsumers

        let started = now()
        let load0 = loadAverage()
        var rows: [TortureRow] = []
        func timed(_ name: String, _ body: () async -> TortureRow) async {
            log("row: \(name)")
            let t0 = now()
            var r = await body()
            r.figures += String(format: "; row took %.0f s", now() - t0)
            log("row \(name): \(r.ok ? "ok" : "FAILED") in \(Int(now() - t0)) s")
            rows.append(r)
        }
        if only.contains("restart") { await timed("restart") { await AudioRestartRow(ctx: ctx).run() } }
        if only.contains("kill") { await timed("kill") { await DaemonKillRow(ctx: ctx).run() } }
        if only.contains("clients") { await timed("clients") { await ClientsRow(ctx: ctx).run() } }
        if only.contains("slow") { await timed("slow") { await SlowConsumersRow(ctx: ctx).run() } }
        if only.contains("files") { await timed("files") { await BadFilesRow(ctx: ctx).run() } }

        print(TortureRow.table(rows))
        print("")
        let m = MachineFacts.read()
        print("Machine: \(m.cpus) × \(m.cpu), Linux \(m.kernel), \(m.memory) RAM; PulseAudio \(m.pulse); \(m.date); load average (1 min) \(load0) at the start, \(loadAverage()) at the end; "
              + String(format: "%.0f s in all.", now() - started))
        let failed = rows.filter { !$0.ok }.count
        print(failed == 0 ? "torture: every row held." : "torture: \(failed) of \(rows.count) rows FAILED.")
        return failed == 0 ? 0 : 1
    }
}
