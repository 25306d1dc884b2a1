import Foundation
import InterludeMeasure
import InterludeClient
import InterludePolicy
import InterludeWire

/// Notification throughput (N15): requests acknowledged — and so persisted in SQLite, which the
/// daemon does before each reply — per second over the socket, with 1 and 8 clients each sending
/// requests one after another. Notifications carry no sound, so only the delivery path is timed.
struct ThroughputBench {
    let socket: String
    let log: (String) -> Void

    struct Result { var clients: Int; var requests: Int; var seconds: Double; var latency: Stats }

    func run(clients: Int, requestsPerClient: Int) async throws -> Result {
        let user = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        defer { user.close() }
        var apps: [InterludeClient] = []
        for i in 0..<clients {
            let app = "org.interlude.bench.Notify\(clients)x\(i)"
            var grant = SettingsParams(app: app)
            grant.authorization = .authorized
            _ = try await user.call(NotificationMethod.setSettings, grant, as: NotificationAppSettings.self)
            let c = try await InterludeClient.connect(socket: socket, app: app)
            _ = try await c.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]),
                                 as: AuthorizationResult.self)
            apps.append(c)
        }
        defer { apps.forEach { $0.close() } }
        let t0 = now()
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for (i, c) in apps.enumerated() {
                group.addTask {
                    var out: [Double] = []
                    for k in 0..<requestsPerClient {
                        let a = now()
                        _ = try await c.call(NotificationMethod.add, AddNotificationParams(identifier: "t\(i)-\(k)", title: "message \(k)"),
                                             as: AddNotificationResult.self)
                        out.append(now() - a)
                    }
                    return out
                }
            }
            var all: [Double] = []
            for try await l in group { all += l }
            return all
        }
        let seconds = now() - t0
        return Result(clients: clients, requests: clients * requestsPerClient, seconds: seconds, latency: Stats(latencies))
    }

    static func table(_ rows: [Result]) -> String {
        var t = "| notification throughput (N15: acknowledged = persisted) | requests | per second | median ack | p95 ack |\n"
        t += "|---|---:|---:|---:|---:|\n"
        for r in rows {
            t += String(format: "| %d client%@ | %d | %.0f | %.2f ms | %.2f ms |\n", r.clients, r.clients == 1 ? "" : "s", r.requests,
                        Double(r.requests) / r.seconds, (r.latency.median ?? 0) * 1000, (r.latency.quantile(0.95) ?? 0) * 1000)
        }
        return t
    }
}
