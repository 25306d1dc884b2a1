import Foundation
import InterludeMeasure
import InterludePolicy
import InterludeStore

/// What one `notification.add` costs as the notification center fills, and as the apps the policy
/// knows grow (issue 9: an event costs in proportion to what it changes, not to what sits idle).
/// In-process, no socket: the center holds N delivered notifications of 100 apps (or of more), with `bursts.maxDeliveredTotal` = N (so a full center,
/// as a desktop's is after a day at the default 1,000: each add drops the oldest, N11) and
/// `maxDeliveredPerApp` = N. Timed per add, the three steps the engine runs for it:
/// `NotificationPolicy.reduce` of the add, the engine's check whether the state changed
/// (`NotificationState ==`), and `NotificationStore.save` of the new state (its row diff and one
/// SQLite commit, WAL, `synchronous=FULL`, in `directory`).
struct CenterBench {
    let directory: String
    let log: (String) -> Void

    struct Result {
        var delivered: Int
        /// Apps known to the policy (each with its record: settings, badge).
        var apps: Int
        var reduce: Stats
        var compare: Stats
        var save: Stats
        /// Rows the last save wrote (inserted + updated + deleted).
        var rowsPerSave: Int
    }

    func run(delivered n: Int, apps appCount: Int = 100, runs: Int) throws -> Result {
        let apps = (0..<appCount).map { "org.interlude.bench.Center\($0)" }
        var config = NotificationPolicyConfig(timeZone: "UTC")
        config.bursts.maxDeliveredTotal = max(1, n)
        config.bursts.maxDeliveredPerApp = max(1, n)
        var t = NotificationTime(1_750_000_000)
        var state = NotificationState()
        for app in apps {
            _ = NotificationPolicy.reduce(&state, .setSettings(app: app, NotificationSettingsChange(authorization: .authorized)), now: t, config: config)
            _ = NotificationPolicy.reduce(&state, .requestAuthorization(app: app, options: [.alert, .badge]), now: t, config: config)
        }
        // One real decision, then N entries like it (filling by N adds would itself be what is measured).
        let probe = NotificationRequest(identifier: "probe", content: NotificationContent(title: "probe", body: "b"))
        _ = NotificationPolicy.reduce(&state, .add(probe, app: apps[0], peerExecutablePath: nil), now: t, config: config)
        guard let decision = state.delivered.last?.decision else { throw Spawn.Failure(description: "center: the probe was not delivered") }
        state.delivered = (0..<n).map { k in
            DeliveredNotification(app: apps[k % apps.count],
                                  request: NotificationRequest(identifier: "old-\(k)", content: NotificationContent(title: "message \(k)", body: "body \(k)")),
                                  deliveredAt: t, late: false, decision: decision)
        }
        let folder = directory + "/center-\(n)-\(appCount)-\(getpid())"
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try NotificationStore(directory: folder)
        defer { store.close() }
        try store.save(state)

        var reduce: [Double] = [], compare: [Double] = [], save: [Double] = []
        var rows = 0
        for i in 0..<(runs + 10) {
            t = t + 0.5  // apart enough that N11's per-second coalescing is not what is measured
            let before = state
            let request = NotificationRequest(identifier: "new-\(i)", content: NotificationContent(title: "new \(i)", body: "b"))
            let a = now()
            let fx = NotificationPolicy.reduce(&state, .add(request, app: apps[i % apps.count], peerExecutablePath: nil), now: t, config: config)
            let b = now()
            let changed = state != before
            let c = now()
            try store.save(state)
            let d = now()
            if fx.isEmpty || !changed { log("warning: center at \(n): the add changed nothing") }
            rows = store.lastSave.rowsWritten
            if i >= 10 { reduce.append(b - a); compare.append(c - b); save.append(d - c) }
        }
        return Result(delivered: n, apps: appCount, reduce: Stats(reduce), compare: Stats(compare), save: Stats(save), rowsPerSave: rows)
    }
}
