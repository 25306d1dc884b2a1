import Foundation
import InterludeClient
import InterludeMeasure
import InterludePolicy
import InterludePulse
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// Thread-safe books shared by the load tasks and the subscriber of row 2.
final class KillBooks: @unchecked Sendable {
    private let lock = NSLock()
    private var ledger = DeliveryLedger()
    func acknowledge(_ k: String) { lock.withLock { ledger.acknowledge(k) } }
    func delivered(_ k: String) { lock.withLock { ledger.delivered(k) } }
    func check(scope: Set<String>, listed: [String]) { lock.withLock { ledger.check(scope: scope, listed: listed) } }
    var snapshot: DeliveryLedger { lock.withLock { ledger } }
}

/// Row 2: the daemon is SIGKILLed at a random moment `kills` times while apps add notifications
/// (some scheduled a fraction of a second ahead, N8) and a prompt ducks music (A2) while the ringer
/// switches an ambient stream's mute (A12). After each start: every notification the daemon
/// acknowledged is in the center (or still pending) exactly once, none was delivered twice (N15),
/// and no stream of ours is left ducked or muted: each is at its user volume (A7's ledger,
/// `applied-gains.json`).
struct DaemonKillRow {
    let ctx: TortureContext
    /// Notifications per app per cycle: under the center's 50 per app (N11), so none is dropped.
    let perApp = 45
    let appsPerCycle = 4

    func run() async -> TortureRow {
        let dir = ctx.work + "/kill"
        var problems: [String] = []
        let books = KillBooks()
        var streamsChecked = 0, streamsLeft = 0
        var worstRestore = 0.0
        var worstOff = 0.0
        var restarts: [Double] = []
        var daemon: DaemonProcess?
        let pulse = PulseConnection(server: ctx.pulseServer, clientName: "interlude-torture-kill")
        var streams: [PulsePlaybackStream] = []
        defer {
            streams.forEach { $0.close() }
            pulse.disconnect()
        }
        var previousScope: [String: Set<String>] = [:]  // app → its acknowledged keys (and unacknowledged tries)
        var tried = 0
        var rng = SystemRandomNumberGenerator()
        do {
            try pulse.connect(timeout: 5)
            let config = try writeConfig(dir + "/config", "{ authorization: { default: \"grant\" } }")
            let d = DaemonProcess(bin: ctx.bin, folder: dir, config: config, pulseServer: ctx.pulseServer)
            daemon = d
            restarts.append(try await d.start())
            for cycle in 0...ctx.kills {
                // 1. The streams the last run left: at their user volume, unmuted, within 2 s.
                if cycle > 0 {
                    let t0 = now()
                    var left: [String] = []
                    var off = 0.0
                    repeat {
                        left = []
                        off = 0
                        let inputs = (try? pulse.sinkInputs()) ?? []
                        for (s, userDb) in zip(streams, [-6.0, -3.0]) {
                            guard let i = inputs.first(where: { $0.index == s.sinkInputIndex }) else { left.append("stream \(s.sinkInputIndex) gone"); continue }
                            if i.muted || abs(i.volumeDb - userDb) > 0.5 {
                                off = max(off, abs(i.volumeDb - userDb))
                                left.append("stream \(i.index) (\(i.applicationName ?? "?")) at \(db(i.volumeDb))\(i.muted ? " muted" : "") (user \(db(userDb)))")
                            }
                        }
                        if left.isEmpty { break }
                        await sleep(0.1)
                    } while now() - t0 < 2
                    streamsChecked += streams.count
                    streamsLeft += left.count
                    if left.isEmpty { worstRestore = max(worstRestore, now() - t0) } else { worstOff = max(worstOff, off) }
                    if !left.isEmpty { problems.append("after kill \(cycle): " + left.joined(separator: "; ")) }
                    streams.forEach { $0.close() }
                    streams = []
                }

                // 2. A subscriber counts deliveries (a second delivery of a key is a duplicate).
                let watcher = try await InterludeClient.connect(socket: d.socket, app: userTool)
                try await watcher.subscribe()
                let watch = Task.detached {
                    for await e in watcher.events where e.event == "notificationDelivered" || e.event == "notificationUpdated" {
                        if let n = e.data["notification"], let app = n["app"]?.stringValue, let id = n["identifier"]?.stringValue {
                            books.delivered(app + "/" + id)
                        }
                    }
                }

                // 3. The last cycle's apps: every acknowledged notification listed once.
                if !previousScope.isEmpty {
                    for (app, scope) in previousScope {
                        var listed: [String] = []
                        let t0 = now()
                        while true {
                            let r = try await watcher.wholeCenter(app: app)  // every page
                            listed = r.notifications.map { $0.app + "/" + $0.identifier } + r.pending.map { $0.app + "/" + $0.identifier }
                            // Scheduled ones fire within 1 s (or at the start, when missed, N15).
                            if r.pending.isEmpty || now() - t0 > 3 { break }
                            await sleep(0.2)
                        }
                        books.check(scope: scope, listed: listed)
                        _ = try await watcher.call(NotificationMethod.remove, RemoveNotificationsParams(app: app, all: true),
                                                   as: RemoveNotificationsResult.self)
                    }
                    previousScope = [:]
                }
                if cycle == ctx.kills { watcher.close(); watch.cancel(); break }

                // 4. Audio: music at a user volume of −6 dB ducked by a prompt that comes and goes;
                // an ambient stream at −3 dB that the ringer mutes (A12).
                try await watcher.setRinger(silent: false)
                let music = try await InterludeClient.connect(socket: d.socket, app: "org.interlude.torture.KillMusic")
                let ms = try await music.register(category: .playback)
                _ = try await music.activate(ms)
                let ambient = try await InterludeClient.connect(socket: d.socket, app: "org.interlude.torture.KillAmbient")
                let asx = try await ambient.register(category: .ambient)
                _ = try await ambient.activate(asx)
                // Roles: after a kill the streams outlive their sessions and the next daemon gives them
                // implicit ones (A10): `music` a non-mixable playback one, no role a mixable one, so
                // that the two orphans do not interrupt each other (A1) while they wait for their apps.
                for (s, tone, userDb, app, role) in [(ms, 440.0, -6.0, "org.interlude.torture.KillMusic", "music"),
                                                     (asx, 660.0, -3.0, "org.interlude.torture.KillAmbient", nil)] {
                    var properties = ["interlude.session": s.rawValue, "application.name": app, "interlude.daemon": d.socket]
                    if let role { properties["media.role"] = role }
                    let st = try PulsePlaybackStream(connection: pulse, name: app, source: .sine(frequency: tone, amplitude: 0.25),
                                                     properties: properties)
                    try await pulse.setUserVolume(sinkInput: st.sinkInputIndex, db: userDb)
                    streams.append(st)
                }
                let prompt = try await InterludeClient.connect(socket: d.socket, app: "org.interlude.torture.KillPrompt")
                let ps = try await prompt.register(category: .playback, mode: .voicePrompt, options: [.duckOthers])
                let audio = Task.detached {
                    var on = false
                    while !Task.isCancelled {
                        do {
                            if on { try await prompt.deactivate(ps) } else { _ = try await prompt.activate(ps) }
                            on.toggle()
                            if Bool.random() { try await watcher.setRinger(silent: on) }
                        } catch { break }
                        try? await Task.sleep(nanoseconds: UInt64.random(in: 50_000_000...250_000_000))
                    }
                }

                // 5. Notification load: 4 apps, each up to 45 adds, one in five scheduled 0.2–0.8 s ahead.
                let apps = (0..<appsPerCycle).map { "org.interlude.torture.K\(cycle)n\($0)" }
                var scope: [String: Set<String>] = [:]
                for app in apps { scope[app] = Set((0..<perApp).map { "\(app)/c\(cycle)-\($0)" }) }
                previousScope = scope
                let perApp = self.perApp
                let load = apps.map { app in
                    Task.detached { () -> Int in
                        var sent = 0
                        do {
                            let c = try await InterludeClient.connect(socket: d.socket, app: app)
                            defer { c.close() }
                            _ = try await c.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]),
                                                 as: AuthorizationResult.self)
                            for k in 0..<perApp {
                                let id = "c\(cycle)-\(k)"
                                let trigger = k % 5 == 4 ? TriggerParams(in: Double.random(in: 0.2...0.8)) : nil
                                sent += 1
                                _ = try await c.call(NotificationMethod.add, AddNotificationParams(identifier: id, title: "torture \(id)", body: "kill cycle \(cycle)", trigger: trigger),
                                                     as: AddNotificationResult.self)
                                books.acknowledge(app + "/" + id)
                            }
                        } catch {}
                        return sent
                    }
                }

                // 6. The fault: SIGKILL at a random moment of the load.
                await sleep(Double.random(in: 0.15...1.2, using: &rng))
                d.kill9()
                for t in load { tried += await t.value }
                audio.cancel(); watch.cancel()
                [watcher, music, ambient, prompt].forEach { $0.close() }
                guard d.crashes.isEmpty else { break }
                restarts.append(try await d.start())
            }
        } catch {
            problems.append("stopped: \(error)")
        }
        daemon?.stop()
        let crashes = daemon?.crashes ?? []
        problems += crashes
        let l = books.snapshot
        if !l.lost.isEmpty { problems.append("lost: " + l.lost.sorted().prefix(5).joined(separator: ", ")) }
        if !l.duplicated.isEmpty { problems.append("duplicated: " + l.duplicated.sorted().prefix(5).joined(separator: ", ")) }
        return TortureRow(
            name: "daemon SIGKILLed during load",
            tried: "\(ctx.kills) kills; \(tried) `notification.add` sent, \(l.acknowledged.count) acknowledged; \(streamsChecked) streams checked",
            failed: l.lost.count + l.duplicated.count + streamsLeft,
            figures: "lost \(l.lost.count), delivered twice \(l.duplicated.count); streams not back at their user volume (±0.5 dB, unmuted) "
                + "2 s after the next start \(streamsLeft) of \(streamsChecked) (worst off by \(String(format: "%.1f", worstOff)) dB; the others back "
                + "≤ \(ms(worstRestore))); start to first answer median \(ms(Stats(restarts).median)); "
                + "daemon crashes \(crashes.count)",
            problems: problems)
    }
}
