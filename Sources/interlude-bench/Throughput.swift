import CSQLite
import Foundation
import InterludeMeasure
import InterludeClient
import InterludePolicy
import InterludeWire

/// Notification throughput (N15): requests acknowledged — and so durable in SQLite, which the
/// daemon waits for before each reply — per second over the socket: with 1, 8 and 64 clients each
/// keeping up to 16 requests in flight (pipelined), and one client waiting for each reply. Beside
/// them, the machine's own limit for one waiting client: one-row SQLite commits per second (WAL,
/// `synchronous=FULL`) in the folder the daemon keeps its state on. And `session.activate` round
/// trips, idle and during an 8-client burst: audio must not wait behind notification saves.
/// Notifications carry no sound, so only the delivery path is timed.
struct ThroughputBench {
    let socket: String
    let log: (String) -> Void

    struct Result {
        var label: String
        var requests: Int
        var seconds: Double
        var latency: Stats
    }

    /// `clients` apps, authorized, connected and asked for authorization.
    func apps(_ clients: Int, tag: String) async throws -> [InterludeClient] {
        let user = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        defer { user.close() }
        var apps: [InterludeClient] = []
        for i in 0..<clients {
            let app = "org.interlude.bench.Notify\(tag)x\(i)"
            var grant = SettingsParams(app: app)
            grant.authorization = .authorized
            _ = try await user.call(NotificationMethod.setSettings, grant, as: NotificationAppSettings.self)
            let c = try await InterludeClient.connect(socket: socket, app: app)
            _ = try await c.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]),
                                 as: AuthorizationResult.self)
            apps.append(c)
        }
        return apps
    }

    /// Each of `clients` clients sends `requestsPerClient` `notification.add`s, with up to
    /// `inFlight` of them outstanding at a time (1 = one waiting for each reply).
    func run(clients: Int, inFlight: Int, requestsPerClient: Int) async throws -> Result {
        let tag = "\(clients)x\(inFlight)"
        let apps = try await apps(clients, tag: tag)
        defer { apps.forEach { $0.close() } }
        let t0 = now()
        let latencies = try await Self.burst(apps, inFlight: inFlight, requestsPerClient: requestsPerClient, tag: tag)
        let seconds = now() - t0
        let label = inFlight == 1 ? "\(clients) client\(clients == 1 ? "" : "s"), each waiting for each reply"
                                  : "\(clients) client\(clients == 1 ? "" : "s"), each pipelining up to \(inFlight)"
        return Result(label: label, requests: clients * requestsPerClient, seconds: seconds, latency: Stats(latencies))
    }

    /// The requests of `run`, returning every acknowledgement's latency (seconds).
    static func burst(_ apps: [InterludeClient], inFlight: Int, requestsPerClient: Int, tag: String) async throws -> [Double] {
        try await withThrowingTaskGroup(of: [Double].self) { group in
            for (i, c) in apps.enumerated() {
                for lane in 0..<inFlight {
                    group.addTask {
                        var out: [Double] = []
                        for k in stride(from: lane, to: requestsPerClient, by: inFlight) {
                            let a = now()
                            _ = try await c.call(NotificationMethod.add,
                                                 AddNotificationParams(identifier: "t\(tag)-\(i)-\(k)", title: "message \(k)"),
                                                 as: AddNotificationResult.self)
                            out.append(now() - a)
                        }
                        return out
                    }
                }
            }
            var all: [Double] = []
            for try await l in group { all += l }
            return all
        }
    }

    /// `session.activate` round trips of a `playback` session (activate timed, deactivate not):
    /// idle, then while 8 clients pipeline `notification.add`s.
    func activation(runs: Int) async throws -> (idle: Stats, duringBurst: Stats, burstRate: Double) {
        let client = try await InterludeClient.connect(socket: socket, app: "org.interlude.bench.Activator")
        defer { client.close() }
        let session = try await client.register(category: .playback)
        func rounds(_ n: Int) async throws -> [Double] {
            var out: [Double] = []
            while out.count < n {
                let a = now()
                _ = try await client.activate(session)
                out.append(now() - a)
                try await client.deactivate(session, notifyOthers: false)
            }
            return out
        }
        _ = try await rounds(5)  // warm-up
        let idle = try await rounds(runs)
        let apps = try await apps(8, tag: "activate")
        defer { apps.forEach { $0.close() } }
        let perClient = 600
        let t0 = now()
        let burst = Task { try await Self.burst(apps, inFlight: 16, requestsPerClient: perClient, tag: "activate") }
        try await Task.sleep(nanoseconds: 20_000_000)  // the burst under way
        var during: [Double] = []
        // `runs` rounds while the burst runs (it lasts longer), 5 ms apart.
        while during.count < runs {
            during += try await rounds(1)
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        let acks = try await burst.value.count
        let rate = Double(acks) / (now() - t0)
        return (Stats(idle), Stats(during), rate)
    }

    /// One-row transactions per second on this machine (WAL, `synchronous=FULL`, as the daemon's
    /// store) in `directory`, for `seconds`.
    static func sqliteCommitRate(directory: String, seconds: Double = 1.5) throws -> Double {
        let path = directory + "/interlude-bench-commit-\(getpid()).sqlite3"
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else { throw Spawn.Failure(description: "cannot open \(path)") }
        defer { sqlite3_close(db) }
        func exec(_ sql: String) throws {
            guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
                throw Spawn.Failure(description: "\(sql): \(String(cString: sqlite3_errmsg(db)))")
            }
        }
        try exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)")
        var n = 0
        let t0 = now()
        while now() - t0 < seconds {
            try exec("BEGIN IMMEDIATE; INSERT INTO t(v) VALUES ('{\"title\":\"message\"}'); COMMIT")
            n += 1
        }
        return Double(n) / (now() - t0)
    }

    static func table(_ rows: [Result], commitRate: Double?, activation: (idle: Stats, duringBurst: Stats, burstRate: Double)?) -> String {
        var t = "| notification throughput (N15: acknowledged = durable) | requests | per second | median ack | p95 ack |\n"
        t += "|---|---:|---:|---:|---:|\n"
        for r in rows {
            t += String(format: "| %@ | %d | %.0f | %.2f ms | %.2f ms |\n", r.label, r.requests,
                        Double(r.requests) / r.seconds, (r.latency.median ?? 0) * 1000, (r.latency.quantile(0.95) ?? 0) * 1000)
        }
        if let commitRate {
            t += String(format: "| this machine: one-row SQLite commits (WAL, `synchronous=FULL`), same folder, same run | | %.0f | | |\n", commitRate)
        }
        if let a = activation {
            t += "\n| `session.activate` round trip | median | p90 | runs |\n|---|---:|---:|---:|\n"
            t += "| idle | \(us(a.idle.median)) | \(us(a.idle.quantile(0.9))) | \(a.idle.count) |\n"
            t += "| during an 8-client `notification.add` burst (16 in flight each; " + String(format: "%.0f", a.burstRate)
                + "/s) | \(us(a.duringBurst.median)) | \(us(a.duringBurst.quantile(0.9))) | \(a.duringBurst.count) |\n"
            if let i = a.idle.median, let d = a.duringBurst.median, i > 0 {
                t += String(format: "| during / idle (target ≤ 2×) | %.2f× | | |\n", d / i)
            }
        }
        return t
    }
}
