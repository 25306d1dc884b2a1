import Foundation
import Testing
import InterludeClient
import InterludeEngine
import InterludePolicy
import InterludeTestSupport
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// Issue 7 hole 7's figure: `notification.add` latency over the socket with 8,000 delivered
/// notifications over 500 apps, against a fresh daemon. The store is in memory (its whole-state
/// diff and SQLite are issue 9's), so this is the engine's and the policy's part. A measurement,
/// not a check: it runs only with INTERLUDE_MEASURE_CENTER=1 and prints its figures;
/// INTERLUDE_MEASURE_OVERLAY is a config overlay for the run (e.g. a larger
/// `bursts.maxDeliveredTotal`).
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["INTERLUDE_MEASURE_CENTER"] == "1"))
struct CenterGrowthMeasurement {
    static func state(apps: Int, perApp: Int) -> NotificationState {
        var s = NotificationState()
        let decision = NotificationDecision(outcome: .delivered, requestedLevel: .active, level: .active, rules: ["N1"], notes: [])
        for a in 0..<apps {
            let app = "org.example.App\(a)"
            var r = NotificationAppRecord(settings: NotificationAppSettings(authorization: .authorized))
            r.requestedOptions = [.alert, .badge]
            s.apps[app] = r
        }
        for i in 0..<perApp {
            for a in 0..<apps {
                let request = NotificationRequest(identifier: "n\(i)", content: NotificationContent(title: "title \(i)", body: "a body of some length \(a)/\(i)"))
                s.delivered.append(DeliveredNotification(app: "org.example.App\(a)", request: request,
                                                         deliveredAt: NotificationTime(1_700_000_000 + Double(i * apps + a)), late: false, decision: decision))
            }
        }
        return s
    }

    func measure(_ label: String, state: NotificationState) async throws {
        let overlay = ProcessInfo.processInfo.environment["INTERLUDE_MEASURE_OVERLAY"] ?? #"{"authorization": {"default": "grant"}}"#
        let d = try TestDaemon(store: MemoryNotificationStore(state), overlay: overlay)
        let app = try await InterludeClient.connect(socket: d.socket, app: "org.example.App7")
        _ = try await app.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]),
                               as: AuthorizationResult.self)
        var ms: [Double] = []
        func cpu() -> Double {
            var ts = timespec()
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
            return Double(ts.tv_sec) * 1000 + Double(ts.tv_nsec) / 1e6
        }
        var cpu0 = cpu()
        for i in 0..<310 {
            if i == 10 { cpu0 = cpu(); ms = [] }  // the first adds trim a loaded center (N11) and warm up
            let t0 = ContinuousClock.now
            _ = try await app.call(NotificationMethod.add, AddNotificationParams(identifier: "m\(i % 40)", title: "t", body: "b"),
                                   as: AddNotificationResult.self)
            let dt = ContinuousClock.now - t0
            ms.append(Double(dt.components.seconds) * 1000 + Double(dt.components.attoseconds) / 1e15)
        }
        let cpuPerAdd = (cpu() - cpu0) / 300
        ms.sort()
        let center = d.store.saved.delivered.count
        print(String(format: "MEASURE %@: notification.add p50 %.2f ms, p90 %.2f ms, max %.2f ms, CPU %.2f ms per add (daemon and client, one process; 300 adds after 10; center %d)",
                     label, ms[150], ms[270], ms[299], cpuPerAdd, center))
    }

    @Test func addLatencyFreshAndWith8000DeliveredOver500Apps() async throws {
        try await measure("fresh", state: NotificationState())
        try await measure("8000 over 500 apps", state: Self.state(apps: 500, perApp: 16))
    }
}
