import Foundation
import InterludeMeasure
import InterludeClient
import InterludePolicy
import InterludeRemote
import InterludeWire
import Synchronization

/// Remote notifications (issue 11): push latency (publish → the device's receipt, which it sends
/// after the decision is saved) and the throughput of a backlog drained after the daemon starts.
/// The bench runs its own `interluded` for a device of the private broker (Scripts/bench starts
/// it with Scripts/mosquitto-private) and acts as the provider.
struct RemoteBench {
    var broker: String
    /// Scripts/mosquitto-private's folder: `USER.password` files.
    var brokerDir: String
    var daemon: String
    var device = "device-16"
    var app = "org.interlude.BenchRemote"
    var log: @Sendable (String) -> Void

    struct Result {
        var latencies: [Double]
        var backlog: Int
        var acknowledged: Int
        var publishSeconds: Double
        var firstReceipt: Double?
        var drainSeconds: Double?
        var received: Int
    }

    final class Receipts: Sendable {
        let arrived = Mutex<[String: Double]>([:])
    }

    func run(rounds: Int, backlog: Int) async throws -> Result {
        let work = NSTemporaryDirectory() + "interlude-bench-remote-\(getpid())"
        try? FileManager.default.removeItem(atPath: work)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        try """
        { authorization: { default: "grant" },
          remote: { broker: "\(broker)", deviceId: "\(device)", passwordFile: "\(brokerDir)/\(device).password" } }
        """.write(toFile: work + "/interlude.json5", atomically: true, encoding: .utf8)
        let socket = work + "/socket"
        func startDaemon() throws -> pid_t {
            let pid = try Spawn.start([daemon, "--socket", socket, "--private", "--state", work + "/state", "--config", work], stderrPath: work + "/log")
            for _ in 0..<200 { guard !UnixSocket.isLive(socket) else { break }; RemoteBench.pause(0.01) }
            return pid
        }
        var pid = try startDaemon()
        defer { kill(pid, SIGTERM); _ = Spawn.wait(pid) }

        // The app registers and the user opts it in (N1, N2).
        let appClient = try await InterludeClient.connect(socket: socket, app: app)
        _ = try await appClient.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]),
                                     as: AuthorizationResult.self)
        _ = try await appClient.call(RemoteMethod.registerRemote, RegisterRemoteParams(enabled: true), as: RegisterRemoteResult.self)
        appClient.close()
        let user = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        var change = SettingsParams(app: app)
        change.remote = true
        _ = try await user.call(NotificationMethod.setSettings, change, as: NotificationAppSettings.self)
        user.close()

        let topics = RemoteTopics(prefix: "interlude/devices", device: device)
        let receipts = Receipts()
        let provider = try MQTTClient(MQTTOptions(broker: try MQTTBrokerURL(broker), clientID: "interlude-bench-\(getpid())", cleanSession: true,
                                                  username: "provider", password: try MQTTOptions.readPasswordFile(brokerDir + "/provider.password")))
        try provider.start(onMessage: { m in
            guard let r = try? JSONDecoder().decode(RemoteReceipt.self, from: Data(m.payload)), let id = r.id else { return }
            let t = PulseClockNow.seconds()
            receipts.arrived.withLock { if $0[id] == nil { $0[id] = t } }
        })
        defer { provider.stop() }
        try provider.waitUntilConnected(timeout: 10)
        _ = try provider.waitForSubscription(provider.subscribe(topics.receipts), timeout: 10)
        func message(_ id: String, thread: String) throws -> [UInt8] {
            try RemoteMessage(id: id, app: app, notification: AddNotificationParams(title: "bench", thread: thread)).encoded()
        }
        // Wait for the daemon's own broker connection: the first message's receipt.
        let warm = "warm-\(getpid())"
        _ = try provider.publish(topics.notifications, message(warm, thread: "w"))
        for _ in 0..<1000 { guard receipts.arrived.withLock({ $0[warm] }) == nil else { break }; RemoteBench.pause(0.01) }

        log("remote: \(rounds) pushes, one at a time")
        var latencies: [Double] = []
        for i in 0..<rounds {
            let id = "lat-\(getpid())-\(i)"
            let t0 = PulseClockNow.seconds()
            _ = try provider.publish(topics.notifications, message(id, thread: "t\(i)"))
            var arrived: Double?
            for _ in 0..<2000 {
                arrived = receipts.arrived.withLock { $0[id] }
                if arrived != nil { break }
                RemoteBench.pause(0.0002)
            }
            if let arrived { latencies.append(arrived - t0) }
            RemoteBench.pause(0.05)
        }

        log("remote: \(backlog) pushes while the daemon is stopped, then the drain")
        kill(pid, SIGTERM)
        _ = Spawn.wait(pid)
        let ids = (0..<backlog).map { "bk-\(getpid())-\($0)" }
        let p0 = PulseClockNow.seconds()
        var mids: Set<Int32> = []
        for (i, id) in ids.enumerated() { mids.insert(try provider.publish(topics.notifications, message(id, thread: "b\(i % 3)"))) }
        let acked = provider.waitForPublished(mids, timeout: 120).count
        let publishSeconds = PulseClockNow.seconds() - p0
        let start = PulseClockNow.seconds()
        pid = try startDaemon()
        let deadline = start + 900
        while PulseClockNow.seconds() < deadline, receipts.arrived.withLock({ r in ids.contains { r[$0] == nil } }) {
            RemoteBench.pause(0.05)
        }
        let times = receipts.arrived.withLock { r in ids.compactMap { r[$0] } }
        return Result(latencies: latencies, backlog: backlog, acknowledged: acked, publishSeconds: publishSeconds,
                      firstReceipt: times.min().map { $0 - start }, drainSeconds: times.max().map { $0 - start }, received: times.count)
    }

    /// Blocks this thread (waits on other processes and the broker's thread, not on tasks).
    static func pause(_ seconds: Double) { usleep(UInt32(seconds * 1e6)) }

    static func table(_ r: Result) -> String {
        let s = Stats(r.latencies)
        var out = "**Remote notifications** (issue 11): a provider publishes QoS 1 to the private mosquitto on 127.0.0.1; the device's `interluded` decides, saves (N15) and publishes its receipt; times on `CLOCK_MONOTONIC` in the provider (the bench).\n\n"
        out += "| what | median | p10–p90 | n |\n|---|---:|---:|---:|\n"
        out += "| push → receipt (decided and saved), one at a time | \(ms(s.median)) | \(ms(s.quantile(0.1)))–\(ms(s.quantile(0.9))) | \(r.latencies.count) |\n\n"
        let drain = r.drainSeconds.map { String(format: "%.1f s", $0) } ?? "–"
        let rate = r.drainSeconds.map { String(format: "%.0f msg/s", Double(r.received) / $0) } ?? "–"
        out += "| backlog | messages | acknowledged by the broker | published in | daemon start → first receipt | → last receipt | drain throughput | receipts |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        out += "| pushed while the daemon was stopped | \(r.backlog) | \(r.acknowledged) | \(String(format: "%.1f s", r.publishSeconds)) | \(ms(r.firstReceipt)) | \(drain) | \(rate) | \(r.received) |"
        return out
    }
}

/// CLOCK_MONOTONIC in seconds (as PulseClock, without importing the Pulse adapter here).
enum PulseClockNow {
    static func seconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
