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
    /// The daemon's pid, for its CPU time per request (/proc); nil: not measured.
    var daemonPID: Int32? = nil
    let log: (String) -> Void

    struct Result {
        var label: String
        var requests: Int
        var seconds: Double
        var latency: Stats
        /// The daemon's CPU time per request during the row, user and system, seconds.
        var daemonCPU: (user: Double, system: Double)? = nil
    }

    /// Runs `body` and returns its result with the daemon's CPU time over it divided by `requests`
    /// (user and system, seconds per request), when the daemon's pid is known.
    func measuringDaemonCPU<T>(requests: Int, _ body: () async throws -> T) async rethrows -> (T, (user: Double, system: Double)?) {
        let before = daemonPID.flatMap(ProcStats.cpuTimes)
        let value = try await body()
        guard let before, let after = daemonPID.flatMap(ProcStats.cpuTimes), requests > 0 else { return (value, nil) }
        return (value, ((after.user - before.user) / Double(requests), (after.system - before.system) / Double(requests)))
    }

    /// `clients` apps authorized by the user (N1's setting), to connect as.
    func grantedApps(_ clients: Int, tag: String) async throws -> [String] {
        let user = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        defer { user.close() }
        var apps: [String] = []
        for i in 0..<clients {
            let app = "org.interlude.bench.Notify\(tag)x\(i)"
            var grant = SettingsParams(app: app)
            grant.authorization = .authorized
            _ = try await user.call(NotificationMethod.setSettings, grant, as: NotificationAppSettings.self)
            apps.append(app)
        }
        return apps
    }

    /// `clients` apps, authorized, connected through the client library and asked for authorization.
    func apps(_ clients: Int, tag: String) async throws -> [InterludeClient] {
        var apps: [InterludeClient] = []
        for app in try await grantedApps(clients, tag: tag) {
            let c = try await InterludeClient.connect(socket: socket, app: app)
            _ = try await c.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]),
                                 as: AuthorizationResult.self)
            apps.append(c)
        }
        return apps
    }

    /// Each of `clients` clients sends `requestsPerClient` `notification.add`s, with up to
    /// `inFlight` of them outstanding at a time (1 = one waiting for each reply).
    ///
    /// The clients are ``RawLoadClient``s, a thread each, writing lines made with string
    /// interpolation and telling replies from events by their first bytes: the load generator runs
    /// on the same two cores as the daemon, and the client library's own JSON work (about as much
    /// CPU per request as the daemon's) made it the bottleneck of the rows and a burden on every
    /// other thread, the activating app's included. With `library`, the clients are
    /// ``InterludeClient``s instead (a row of their own: what an app using the library sees).
    func run(clients: Int, inFlight: Int, requestsPerClient: Int, library: Bool = false) async throws -> Result {
        let tag = "\(clients)x\(inFlight)\(library ? "lib" : "")"
        let latencies: [Double]
        let t0: Double
        let cpu: (user: Double, system: Double)?
        if library {
            let apps = try await apps(clients, tag: tag)
            defer { apps.forEach { $0.close() } }
            t0 = now()
            (latencies, cpu) = try await measuringDaemonCPU(requests: clients * requestsPerClient) {
                try await Self.burst(apps, inFlight: inFlight, requestsPerClient: requestsPerClient, tag: tag)
            }
        } else {
            let apps = try await rawApps(clients, tag: tag)
            defer { apps.forEach { $0.close() } }
            t0 = now()
            (latencies, cpu) = try await measuringDaemonCPU(requests: clients * requestsPerClient) {
                try await RawLoadClient.burst(apps, inFlight: inFlight, requestsPerClient: requestsPerClient, tag: tag)
            }
        }
        let seconds = now() - t0
        var label = inFlight == 1 ? "\(clients) client\(clients == 1 ? "" : "s"), each waiting for each reply"
                                  : "\(clients) client\(clients == 1 ? "" : "s"), each pipelining up to \(inFlight)"
        if library { label += ", through the client library (InterludeClient)" }
        return Result(label: label, requests: clients * requestsPerClient, seconds: seconds, latency: Stats(latencies), daemonCPU: cpu)
    }

    /// The floor under one waiting client's round trip: `count` `focus.status` requests (read only,
    /// nothing to save), one at a time, from a ``RawLoadClient`` as in the throughput rows; their
    /// rate per second. With the one-row commit rate this gives the most one waiting client could
    /// reach on this machine: `1 / (1/floor + 1/commits)` (a request that did no work but one
    /// one-row commit).
    /// Also returns the daemon's CPU time per `focus.status` (user, system; seconds).
    func floorRate(count: Int) async throws -> (rate: Double, daemonCPU: (user: Double, system: Double)?) {
        let apps = try await rawApps(1, tag: "floor")
        defer { apps.forEach { $0.close() } }
        let c = apps[0]
        let (seconds, cpu) = try await measuringDaemonCPU(requests: count) {
            try await c.line.onThread { () throws -> Double in
                let t0 = now()
                _ = try c.run(inFlight: 1, requests: count) { _ in #""method":"focus.status""# }
                return now() - t0
            }
        }
        return (Double(count) / seconds, cpu)
    }

    /// `clients` apps, authorized, connected as ``RawLoadClient``s and asked for authorization.
    func rawApps(_ clients: Int, tag: String) async throws -> [RawLoadClient] {
        var apps: [RawLoadClient] = []
        for app in try await grantedApps(clients, tag: tag) {
            let c = try RawLoadClient(socket: socket, app: app)
            _ = try c.line.call(NotificationMethod.requestAuthorization, #"{"options":["alert","badge"]}"#)
            apps.append(c)
        }
        return apps
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
    /// idle, then while 8 clients pipeline `notification.add`s. The activating app is a blocking
    /// client on a thread of its own (``LineClient``), as a calling app is a process of its own:
    /// timed from this process's Swift concurrency pool it would also wait for the pool's two
    /// threads, busy with the burst's 128 tasks (a bench artefact, not the daemon's latency).
    ///
    /// The rounds during the burst are 5 ms apart, so the idle rounds that they are compared with
    /// are too (the daemon's threads asleep between them, as between a real app's requests);
    /// back-to-back idle rounds, with every thread still awake, are printed beside them.
    ///
    /// The machine's own limit beside it: the same rounds while the bench keeps every core busy
    /// with arithmetic in threads of its own and no notification flows (``SpinLoad``). What the
    /// burst costs an activation beyond busy cores is the ratio of the two.
    func activation(runs: Int) async throws -> (idle: Stats, idleBackToBack: Stats, duringBurst: Stats, burstRate: Double,
                                                 underCPULoad: Stats, spinThreads: Int) {
        let activator = try LineClient(socket: socket, app: "org.interlude.bench.Activator")
        defer { activator.close() }
        let session = try activator.call("session.register", #"{"category":"playback"}"#)
        guard let id = session.range(of: #""session":""#).map({ session[$0.upperBound...].prefix { $0 != "\"" } }) else {
            throw Spawn.Failure(description: "session.register answered \(session)")
        }
        let activate = #"{"session":"\#(id)"}"#, deactivate = #"{"session":"\#(id)","notifyOthers":false}"#
        /// `n` rounds on the activator's thread, `pause` seconds apart: each round's activation
        /// round trip and when it ended (seconds).
        func timedRounds(_ n: Int, pause: Double = 0) async throws -> [(seconds: Double, end: Double)] {
            try await activator.onThread {
                var out: [(seconds: Double, end: Double)] = []
                while out.count < n {
                    let a = now()
                    _ = try activator.call("session.activate", activate)
                    let b = now()
                    out.append((b - a, b))
                    _ = try activator.call("session.deactivate", deactivate)
                    if pause > 0 { usleep(UInt32(pause * 1e6)) }
                }
                return out
            }
        }
        func rounds(_ n: Int, pause: Double = 0) async throws -> [Double] { try await timedRounds(n, pause: pause).map(\.seconds) }
        _ = try await rounds(5)  // warm-up
        let backToBack = try await rounds(runs)
        let idle = try await rounds(runs, pause: 0.005)
        let spin = SpinLoad(threads: ProcessInfo.processInfo.activeProcessorCount)
        let underLoad = try await rounds(runs, pause: 0.005)
        spin.stop()
        let apps = try await rawApps(8, tag: "activate")
        defer { apps.forEach { $0.close() } }
        // Long enough to outlast the rounds (each ≈ 5.5 ms; about 1 s of burst per 100 rounds at
        // 10,000/s); a round that ended after the burst is not counted.
        let perClient = max(600, runs * 20)
        let t0 = now()
        let burst = Task { () throws -> (count: Int, end: Double) in
            let acks = try await RawLoadClient.burst(apps, inFlight: 16, requestsPerClient: perClient, tag: "activate")
            return (acks.count, now())
        }
        try await Task.sleep(nanoseconds: 20_000_000)  // the burst under way
        // `runs` rounds while the burst runs, 5 ms apart, each with the time it ended.
        let timed = try await timedRounds(runs, pause: 0.005)
        let (acks, end) = try await burst.value
        let rate = Double(acks) / (end - t0)
        return (Stats(idle), Stats(backToBack), Stats(timed.filter { $0.end <= end }.map(\.seconds)), rate,
                Stats(underLoad), spin.threads)
    }

    /// Transactions per second on this machine (WAL, `synchronous=FULL`, as the daemon's store) in
    /// `directory`, for `seconds`: one-row inserts, or with `daemonShape` the rows one
    /// `notification.add` of an app at its limits changes in the daemon's store: the app's oldest
    /// delivered row rewritten with the new notification (N11), the oldest decision-log row with
    /// its decision (N16), the app's record (its badge, N12) and one meta value updated; the same
    /// tables (schema 2: rows in slots) and row sizes as `NotificationStore`'s.
    static func sqliteCommitRate(directory: String, seconds: Double = 1.5, daemonShape: Bool = false) throws -> Double {
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
        if daemonShape {
            // The daemon's store, schema 2 (NotificationStore): list rows in slots of their own.
            try exec("""
                CREATE TABLE app(app_id TEXT PRIMARY KEY NOT NULL, json TEXT NOT NULL);
                CREATE TABLE delivered(slot INTEGER PRIMARY KEY, seq INTEGER NOT NULL, app_id TEXT NOT NULL, identifier TEXT NOT NULL, json TEXT NOT NULL);
                CREATE TABLE decision_log(slot INTEGER PRIMARY KEY, seq INTEGER NOT NULL, app_id TEXT NOT NULL, identifier TEXT NOT NULL, json TEXT NOT NULL);
                CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, json TEXT NOT NULL);
                """)
            // Full as after a burst: 1,000 delivered (50 of each of 20 apps), 200 decisions.
            let notification = "'" + String(repeating: "n", count: 400) + "'"
            let decision = "'" + String(repeating: "d", count: 250) + "'"
            try exec("BEGIN")
            for a in 0..<20 { try exec("INSERT INTO app VALUES ('org.example.App\(a)', '\(String(repeating: "a", count: 200))')") }
            for k in 0..<1000 { try exec("INSERT INTO delivered VALUES (\(k + 1), \(k + 1), 'org.example.App\(k % 20)', 'n\(k)', \(notification))") }
            for k in 0..<200 { try exec("INSERT INTO decision_log VALUES (\(k + 1), \(k + 1), 'org.example.App\(k % 20)', 'n\(k)', \(decision))") }
            try exec("INSERT INTO meta VALUES ('history', '\(String(repeating: "h", count: 100))'); COMMIT")
        }
        // Prepared once, as the daemon's store prepares its statements: each transaction then costs
        // what the disk and SQLite's pages cost, not compiling SQL text (`sqlite3_exec` compiled
        // the four 400-byte UPDATEs of an add every time: 5,779 adds/s against 8,071 one-row
        // commits in the README's earlier run, a third of which was compiling).
        func prepare(_ sql: String) throws -> OpaquePointer {
            var st: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &st, nil) == SQLITE_OK, let st else {
                throw Spawn.Failure(description: "\(sql): \(String(cString: sqlite3_errmsg(db)))")
            }
            return st
        }
        let begin = try prepare("BEGIN IMMEDIATE"), commit = try prepare("COMMIT")
        let statements = daemonShape
            ? [try prepare("UPDATE delivered SET seq = ?1, app_id = ?2, identifier = ?3, json = ?4 WHERE slot = ?5"),
               try prepare("UPDATE decision_log SET seq = ?1, app_id = ?2, identifier = ?3, json = ?4 WHERE slot = ?5"),
               try prepare("UPDATE app SET json = ?4 WHERE app_id = ?2"),
               try prepare("UPDATE meta SET json = ?4 WHERE key = 'history'")]
            : [try prepare("INSERT INTO t(v) VALUES ('{\"title\":\"message\"}')")]
        defer { for st in [begin, commit] + statements { sqlite3_finalize(st) } }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)  // SQLITE_TRANSIENT: SQLite copies the text
        func run(_ st: OpaquePointer, _ texts: [Int32: String] = [:], _ ints: [Int32: Int64] = [:]) throws {
            for (i, t) in texts where sqlite3_bind_parameter_count(st) >= i { sqlite3_bind_text(st, i, t, -1, transient) }
            for (i, v) in ints where sqlite3_bind_parameter_count(st) >= i { sqlite3_bind_int64(st, i, v) }
            let rc = sqlite3_step(st)
            sqlite3_reset(st)
            sqlite3_clear_bindings(st)
            guard rc == SQLITE_DONE else { throw Spawn.Failure(description: "step: \(String(cString: sqlite3_errmsg(db)))") }
        }
        let notification = String(repeating: "n", count: 400), decision = String(repeating: "d", count: 250)
        let record = String(repeating: "b", count: 200)
        let t0 = now()
        while now() - t0 < seconds {
            try run(begin)
            if daemonShape {
                // An add at the app's limit and the log's: the new notification and its decision
                // take the rows of the oldest (the store knows their slots), the app's record (its
                // badge) and a meta value change.
                let app = "org.example.App\(n % 20)", seq = Int64(2000 + n)
                try run(statements[0], [2: app, 3: "m\(n)", 4: notification], [1: seq, 5: Int64(n % 1000 + 1)])
                try run(statements[1], [2: app, 3: "m\(n)", 4: decision], [1: seq, 5: Int64(n % 200 + 1)])
                try run(statements[2], [2: app, 4: record + "\(n)"])
                try run(statements[3], [4: "\(n)"])
            } else {
                try run(statements[0])
            }
            try run(commit)
            n += 1
        }
        return Double(n) / (now() - t0)
    }

    static func table(_ rows: [Result], commitRate: Double?, shapedCommitRate: Double? = nil, floorRate: Double? = nil,
                      floorCPU: (user: Double, system: Double)? = nil, activation: (idle: Stats, idleBackToBack: Stats, duringBurst: Stats, burstRate: Double,
                                                                                underCPULoad: Stats, spinThreads: Int)?) -> String {
        var t = "| notification throughput (N15: acknowledged = durable) | requests | per second | median ack | p95 ack |\n"
        t += "|---|---:|---:|---:|---:|\n"
        for r in rows {
            t += String(format: "| %@ | %d | %.0f | %.2f ms | %.2f ms |\n", r.label, r.requests,
                        Double(r.requests) / r.seconds, (r.latency.median ?? 0) * 1000, (r.latency.quantile(0.95) ?? 0) * 1000)
        }
        if let commitRate {
            t += String(format: "| this machine: one-row SQLite commits (WAL, `synchronous=FULL`), same folder, same run | | %.0f | | |\n", commitRate)
        }
        if let shapedCommitRate {
            t += String(format: "| this machine: SQLite commits of one add's rows (4 rows rewritten in 4 tables, as the daemon's store), same folder, same run | | %.0f | | |\n", shapedCommitRate)
        }
        if let waiting = rows.first(where: { $0.label.hasPrefix("1 client, each waiting") && $0.seconds > 0 }) {
            let rate = Double(waiting.requests) / waiting.seconds
            if let commitRate { t += String(format: "| one waiting client / one-row commits (target ≥ 0.5) | | %.2f | | |\n", rate / commitRate) }
            if let shapedCommitRate { t += String(format: "| one waiting client / commits of one add's rows | | %.2f | | |\n", rate / shapedCommitRate) }
            if let floorRate, let commitRate {
                let ceiling = 1 / (1 / floorRate + 1 / commitRate)
                t += String(format: "| this machine: one waiting client's `focus.status` (nothing saved), same client, same run | | %.0f | %.2f ms | |\n", floorRate, 1000 / floorRate)
                t += String(format: "| this machine's ceiling for one waiting client: 1 / (that round trip + one one-row commit) | | %.0f | | |\n", ceiling)
                t += String(format: "| that ceiling / one-row commits (the best ratio this machine allows) | | %.2f | | |\n", ceiling / commitRate)
                t += String(format: "| one waiting client / that ceiling | | %.2f | | |\n", rate / ceiling)
            }
        }
        let cpuRows = rows.compactMap { r in r.daemonCPU.map { (r.label, $0) } }
            + (floorCPU.map { [("1 client waiting for each `focus.status` (nothing saved: the floor above)", $0)] } ?? [])
        if !cpuRows.isEmpty {
            // What one request costs the daemon: for one waiting client all of it is on the round
            // trip (the system time includes the commit's fdatasync work in ext4 and the block layer).
            t += "\n| the daemon's CPU time per request (/proc, 10 ms ticks) | user | system |\n|---|---:|---:|\n"
            for (label, cpu) in cpuRows {
                t += "| \(label) | \(us(cpu.user)) | \(us(cpu.system)) |\n"
            }
        }
        if let a = activation {
            t += "\n| `session.activate` round trip | median | p90 | runs |\n|---|---:|---:|---:|\n"
            t += "| idle, back to back | \(us(a.idleBackToBack.median)) | \(us(a.idleBackToBack.quantile(0.9))) | \(a.idleBackToBack.count) |\n"
            t += "| idle, 5 ms apart (as during the burst) | \(us(a.idle.median)) | \(us(a.idle.quantile(0.9))) | \(a.idle.count) |\n"
            t += "| during an 8-client `notification.add` burst (16 in flight each; " + String(format: "%.0f", a.burstRate)
                + "/s), 5 ms apart | \(us(a.duringBurst.median)) | \(us(a.duringBurst.quantile(0.9))) | \(a.duringBurst.count) |\n"
            t += "| this machine: while \(a.spinThreads) threads of the bench spin (every core busy, no notifications), 5 ms apart | "
                + "\(us(a.underCPULoad.median)) | \(us(a.underCPULoad.quantile(0.9))) | \(a.underCPULoad.count) |\n"
            if let i = a.idle.median, let d = a.duringBurst.median, i > 0 {
                t += String(format: "| during / idle 5 ms apart (target ≤ 2×) | %.2f× | | |\n", d / i)
                if let l = a.underCPULoad.median, l > 0 {
                    t += String(format: "| busy cores alone / idle 5 ms apart | %.2f× | | |\n", l / i)
                    t += String(format: "| during the burst / busy cores alone | %.2f× | | |\n", d / l)
                }
            }
        }
        return t
    }
}

/// A client that blocks on its socket: one request at a time, written whole, its reply read
/// whole (events are skipped). Its calls run on a thread of its own (``onThread(_:)``), outside
/// Swift's concurrency pool, as another process's would.
final class LineClient: @unchecked Sendable {
    // `@unchecked Sendable`: used by one thread at a time (the caller's, or the one `onThread` starts).
    let fd: Int32
    private var buffer: [UInt8] = []
    private var nextID = 1

    /// Connects to `socket`, reads the greeting and says hello as `app`.
    /// - Throws: `Spawn.Failure` when the daemon cannot be reached or refuses.
    init(socket: String, app: String) throws {
        fd = try UnixSocket.connect(socket)
        _ = try line()  // the greeting
        _ = try call("hello", #"{"app":"\#(app)"}"#)
    }

    func close() { Glibc.close(fd) }

    /// Sends one request and returns its reply line.
    /// - Throws: `Spawn.Failure` on an error reply or a closed connection.
    func call(_ method: String, _ params: String) throws -> String {
        let id = nextID
        nextID += 1
        try writeAll(Array(#"{"id":\#(id),"method":"\#(method)","params":\#(params)}"#.utf8) + [10])
        while true {
            let reply = try line()
            guard reply.hasPrefix(#"{"id":\#(id),"#) || reply.contains(#""id":\#(id),"#) else { continue }  // an event
            if reply.contains(#""error":"#) { throw Spawn.Failure(description: "\(method): \(reply)") }
            return reply
        }
    }

    /// Writes `bytes` whole.
    /// - Throws: `Spawn.Failure` when the connection is gone.
    func writeAll(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw Spawn.Failure(description: "write failed: the daemon closed the connection") }
            sent += n
        }
    }

    /// Runs `body` on a new thread and returns what it returned.
    func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            let t = Thread { c.resume(with: Result { try body() }) }
            t.start()
        }
    }

    private func line() throws -> String {
        while true {
            if let nl = buffer.firstIndex(of: 10) {
                let l = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                return l
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw Spawn.Failure(description: "the daemon closed the connection") }
            buffer += chunk[..<n]
        }
    }
}

/// A load-generating app on a thread of its own: `notification.add` lines made by string
/// interpolation, written several at a time, and replies told from events by their first bytes
/// (every line the daemon writes has its keys sorted: a reply starts `{"id":`, an error reply
/// `{"error":`, an event `{"data":`). Replies come in request order (PROTOCOL.md), so each one's
/// latency is its request's, first in, first out.
final class RawLoadClient: @unchecked Sendable {
    // `@unchecked Sendable`: used by one thread at a time (the set-up's, then its burst thread).
    let line: LineClient

    init(socket: String, app: String) throws { line = try LineClient(socket: socket, app: app) }

    func close() { line.close() }

    /// Each client sends `requestsPerClient` adds with up to `inFlight` outstanding, each on a
    /// thread of its own; every acknowledgement's latency (seconds).
    /// - Throws: `Spawn.Failure` on an error reply or a closed connection.
    static func burst(_ clients: [RawLoadClient], inFlight: Int, requestsPerClient: Int, tag: String) async throws -> [Double] {
        try await withThrowingTaskGroup(of: [Double].self) { group in
            for (i, c) in clients.enumerated() {
                group.addTask {
                    try await c.line.onThread { try c.run(inFlight: inFlight, requests: requestsPerClient, request: Self.add(prefix: "r\(tag)-\(i)-")) }
                }
            }
            var all: [Double] = []
            for try await l in group { all += l }
            return all
        }
    }

    /// A `notification.add` of a raw client: the request's method and params (after its id).
    static func add(prefix: String) -> @Sendable (Int) -> String {
        { k in #""method":"notification.add","params":{"identifier":"\#(prefix)\#(k)","title":"message \#(k)"}"# }
    }

    /// `requests` requests, `request(k)` the k-th one's method and params, with up to `inFlight`
    /// outstanding, on the calling thread (one client's burst); every reply's latency (seconds).
    func run(inFlight: Int, requests: Int, request: (Int) -> String) throws -> [Double] {
        var sentAt = [Double](repeating: 0, count: requests)
        var latencies: [Double] = []
        latencies.reserveCapacity(requests)
        var sent = 0, acked = 0
        var out: [UInt8] = []
        var partial: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        let firstID = 1_000_000
        while acked < requests {
            out.removeAll(keepingCapacity: true)
            let t = now()
            while sent < requests, sent - acked < inFlight {
                out += Array(#"{"id":\#(firstID + sent),\#(request(sent))}"#.utf8)
                out.append(10)
                sentAt[sent] = t
                sent += 1
            }
            try line.writeAll(out)
            let n = chunk.withUnsafeMutableBytes { read(line.fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw Spawn.Failure(description: "the daemon closed the connection after \(acked) acknowledgements") }
            let got = now()
            var start = 0
            for k in 0..<n where chunk[k] == 10 {
                let l: ArraySlice<UInt8> = partial.isEmpty ? chunk[start..<k] : ArraySlice(partial + chunk[start..<k])
                partial.removeAll(keepingCapacity: true)
                start = k + 1
                if l.starts(with: Self.replyPrefix) {
                    latencies.append(got - sentAt[acked])
                    acked += 1
                } else if l.starts(with: Self.errorPrefix) {
                    throw Spawn.Failure(description: "request \(acked): \(String(decoding: l, as: UTF8.self))")
                }
            }
            partial += chunk[start..<n]
        }
        return latencies
    }

    static let replyPrefix = Array(#"{"id":"#.utf8)
    static let errorPrefix = Array(#"{"error":"#.utf8)
}

/// Every core kept busy with arithmetic by threads of the bench (no I/O, no notifications): the
/// machine's own load limit for the activation rows (issue 9: a reference in the same run).
final class SpinLoad: @unchecked Sendable {
    let threads: Int
    private let lock = NSLock()
    private var running = true
    private let done = DispatchGroup()

    init(threads: Int) {
        self.threads = threads
        for _ in 0..<threads {
            done.enter()
            Thread { [self] in
                var x: UInt64 = 1
                while lock.withLock({ running }) {
                    for _ in 0..<10_000 { x = x &* 6364136223846793005 &+ 1442695040888963407 }
                }
                if x == 42 { print("") }  // keeps the loop's work
                done.leave()
            }.start()
        }
    }

    /// Stops the threads and waits for them to end.
    func stop() {
        lock.withLock { running = false }
        done.wait()
    }
}
