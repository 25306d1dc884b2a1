import Foundation
@testable import InterludeEngine
import InterludeConfig
import InterludePolicy
import InterludeTestSupport
import InterludeWire
import Testing

/// The daemon's log says every decision, not only deliveries (N16; a fresh user's finding, issue 9):
/// a request held for its trigger (N8), one refused (N1), and the oldest notifications N11's
/// per-app limit removed from the center. Those lines do not start "notification APP/ID", which
/// says what reached the center (log readers, the remote tests among them, count those).
@Suite struct DecisionLogTests {
    @Test func heldRefusedAndN11RemovalsAreLogged_N8_N1_N11() async throws {
        let log = StoppingTests.Lines()
        let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(
            #"{"authorization": {"default": "grant"}, "bursts": {"maxDeliveredPerApp": 2}}"#)))
        let engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: FakeSoundPlayer(), store: MemoryNotificationStore(),
                                version: "test", log: log.append)
        let chat = await engine.connect(pid: getpid(), sink: { _ in })
        _ = try await engine.hello(client: chat, app: "org.example.Chat")
        _ = try await engine.requestAuthorization(client: chat, RequestAuthorizationParams(options: [.alert]))
        for i in 1...3 { _ = try await engine.addNotification(client: chat, AddNotificationParams(identifier: "m\(i)", title: "hi")) }
        #expect(log.all.contains("center: removed org.example.Chat/m1, over the center's limits [N11]"), "\(log.all)")
        #expect(log.all.filter { $0.hasPrefix("notification org.example.Chat/") }.count == 3, "one line per delivery: \(log.all)")

        let later = AddNotificationParams(identifier: "later", title: "in a minute", trigger: TriggerParams(in: 60))
        _ = try await engine.addNotification(client: chat, later)
        #expect(log.all.contains { $0.hasPrefix("not delivered: org.example.Chat/later held until 20") && $0.contains("Z [N8]") && $0.hasSuffix("[N8]") }, "\(log.all)")

        let badge = AddNotificationParams(identifier: "b1", title: "", badge: 3)
        _ = try await engine.addNotification(client: chat, badge)
        #expect(log.all.contains { $0.hasPrefix("not delivered: org.example.Chat/b1 badge only, nothing in the center [") }, "\(log.all)")

        var deny = SettingsParams(app: "org.example.Spam")
        deny.authorization = .denied
        let user = await engine.connect(pid: getpid(), sink: { _ in })
        _ = try await engine.hello(client: user, app: "org.interlude.CLI")
        _ = try await engine.setSettings(client: user, deny)
        let spam = await engine.connect(pid: getpid(), sink: { _ in })
        _ = try await engine.hello(client: spam, app: "org.example.Spam")
        await #expect(throws: WireError.self) {
            _ = try await engine.addNotification(client: spam, AddNotificationParams(identifier: "s1", title: "buy"))
        }
        #expect(log.all.contains { $0.hasPrefix("not delivered: org.example.Spam/s1 rejected notAuthorized [") }, "\(log.all)")
    }

    /// N11 and the output bound: a lowered limit that drops many notifications tells the app in
    /// several `notificationRemoved` events of at most 32 KiB of identifiers each, in order (one
    /// event of 1,100 identifiers of 1 KB was over `server.maxOutputBytes`, and the daemon dropped
    /// the app and every watcher instead: a stranger's find), and logs one short line.
    @Test func manyRemovalsComeInPartsUnderTheOutputBound_N11() async throws {
        let log = StoppingTests.Lines()
        func config(perApp: Int) throws -> InterludeConfig {
            try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(
                #"{"authorization": {"default": "grant"}, "bursts": {"maxDeliveredPerApp": \#(perApp), "maxDeliveredTotal": 2000}, "server": {"logNotificationsPerSecond": 0}}"#)))
        }
        let engine = try Engine(config: try config(perApp: 1000), audio: FakeAudioBackend(), sounds: FakeSoundPlayer(),
                                store: MemoryNotificationStore(), version: "test", log: log.append)
        let events = StoppingTests.Lines()
        let chat = await engine.connect(pid: getpid(), sink: { e in
            guard e.name == NotificationEventName.removed, case let .array(ids)? = e.wire.data["identifiers"] else { return }
            events.append(ids.compactMap(\.stringValue).joined(separator: "\n"))
        })
        _ = try await engine.hello(client: chat, app: "org.example.Chat")
        _ = try await engine.requestAuthorization(client: chat, RequestAuthorizationParams(options: [.alert]))
        let ids = (0..<300).map { "n\($0)-" + String(repeating: "x", count: 1000) }
        for id in ids { _ = try await engine.addNotification(client: chat, AddNotificationParams(identifier: id, title: "hi")) }
        #expect(events.all.isEmpty)

        let reloaded = await engine.reload(config: try config(perApp: 1))
        #expect(reloaded.dropped == 299, "the reload says how many it dropped")
        #expect(log.all.contains("center: the limits (bursts.maxDeliveredPerApp 1, bursts.maxDeliveredTotal 2000) dropped 299 notifications of 1 app [N11]"),
                "\(log.all.filter { $0.hasPrefix("center:") }.map { $0.prefix(120) })")
        #expect(await engine.reload(config: try config(perApp: 1)).dropped == nil, "nothing more to drop")
        let parts = events.all.map { $0.split(separator: "\n").map(String.init) }
        #expect(parts.count >= 9, "300 KB of identifiers in parts of at most 32 KiB: \(parts.count)")
        #expect(parts.allSatisfy { $0.reduce(0) { $0 + $1.utf8.count } <= 32 * 1024 })
        #expect(parts.flatMap { $0 } == Array(ids.dropLast()), "every dropped identifier once, oldest first")
        let line = log.all.first { $0.hasPrefix("center: removed org.example.Chat/") } ?? ""
        #expect(line.hasSuffix(" and 289 more (299 in all), over the center's limits [N11]") && line.utf8.count < 1_000, "\(line.prefix(200))")
        #expect(line.contains("n0-" + String(repeating: "x", count: 61) + "…,n1-"), "each shown identifier cut to 64 characters: \(line.prefix(200))")
    }

    /// What a connection may hold of paced lines follows the center's limits, at start and at a
    /// reload: a whole removal (every identifier the center, the summary and the pending requests
    /// can hold, at 1 KiB written twice over, for the events and the reply).
    @Test func theRemovalAllowanceFollowsTheCenterLimits_N11() async throws {
        let engine = try Engine(config: try ConfigLoader.load(folders: []), audio: FakeAudioBackend(), sounds: FakeSoundPlayer(),
                                store: MemoryNotificationStore(), version: "test")
        #expect(engine.removalAllowance.value == 2 * (2 * 1000 + 1000) * 2051, "12.3 MB at the default limits")
        await engine.reload(config: try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(
            #"{"bursts": {"maxDeliveredTotal": 50}, "maxPendingTotal": 10}"#))))
        #expect(engine.removalAllowance.value == 2 * (2 * 50 + 10) * 2051)
    }

    /// The parts are bounded as written, not by UTF-8 bytes alone: 20,000 short identifiers (and
    /// some with quotes and backslashes, escaped on the wire) make events of at most 32 KiB of
    /// JSON each, above which the smallest `server.maxOutputBytes` (64 KiB) would be neared.
    @Test func removedEventPartsAreBoundedAsWritten() throws {
        let ids = (0..<20_000).map { $0 % 7 == 0 ? "q\"\\\($0)" : "\($0)" }
        let parts = Engine.removedEventParts(ids)
        #expect(parts.flatMap { $0 } == ids)
        for part in parts {
            let written = try WireCoding.encode(JSONValue.array(part.map(JSONValue.string)))
            #expect(written.count <= Engine.maxRemovedEventBytes, "\(written.count) bytes")
        }
        #expect(Engine.removedEventParts([]) == [[]])
    }

    /// N16 and the log's size: a flood of 300 adds at one instant logs the first 200 (a burst of
    /// ten times `server.logNotificationsPerSecond`, 20) and says once that it leaves the rest
    /// out; every 10 s a timer sums up the lines left out while they come faster than 20 a
    /// second, and says the flood is over at the first 10 s under it; the next add is logged.
    /// Decisions left out of the log stay in the decision log (`interlude explain`). At 0, every
    /// line. (A stranger's daemon logged 162 MB in 15 minutes of flooding, a line per delivery and
    /// per N11 removal.)
    @Test(arguments: [20, 0])
    func aFloodOfNotificationsIsCountedNotLogged_N16(perSecond: Int) async throws {
        let (engine, chat, log, clock) = try await Self.flooded(perSecond: perSecond)
        let deliveries = log.all.filter { $0.hasPrefix("notification org.example.Chat/") }
        let leaving = log.all.filter { $0.hasPrefix("notification lines over 20 a second: counted, not logged, and summed up every 10 s") }
        if perSecond == 0 {
            #expect(deliveries.count == 300)
            #expect(leaving.isEmpty)
            return
        }
        #expect(deliveries.count == 200, "the burst: \(deliveries.count)")
        #expect(deliveries.last == "notification org.example.Chat/m199 delivered sound=none [N1]")
        #expect(leaving.count == 1, "said once: \(leaving)")
        clock.advance(by: 5)
        for i in 0..<150 { _ = try await engine.addNotification(client: chat, AddNotificationParams(identifier: "more\(i)", title: "hi")) }
        clock.advance(by: 5)
        // The timer's sum, without another add: 250 in 10 s, over the 200 the rate allows.
        #expect(await Self.logged("250 notification lines not logged in the last 10.0 s [N16]", in: log), "\(log.all.suffix(2))")
        clock.advance(by: 10)
        #expect(await Self.logged("0 notification lines not logged in the last 10.0 s; the flood is over [N16]", in: log), "\(log.all.suffix(2))")
        _ = try await engine.addNotification(client: chat, AddNotificationParams(identifier: "after", title: "hi"))
        #expect(log.all.last == "notification org.example.Chat/after delivered sound=none [N1]")
        #expect(log.all.filter { $0.contains("[N16]") }.count == 3, "begins, one sum, over: \(log.all.filter { $0.contains("[N16]") })")
        // Left out of the log, not out of the decision log.
        let user = await engine.connect(pid: getpid(), sink: { _ in })
        _ = try await engine.hello(client: user, app: "org.interlude.CLI")
        let explained = try await engine.explain(client: user, ExplainParams(app: "org.example.Chat", identifier: "more100"))
        #expect(explained.decision.rules.contains("N1"), "\(explained)")
    }

    /// A reload that changes the rate during a flood, and the daemon's stop, say what the flood
    /// left out first (the stranger's find: a reload from 20 to 0 lost about 15,000 lines' count,
    /// and a SIGTERM during a flood the last 5 s of it).
    @Test(arguments: ["reload", "stop"])
    func aFloodEndedByAReloadOrTheStopSaysItsCount_N16(how: String) async throws {
        let (engine, chat, log, _) = try await Self.flooded(perSecond: 20)
        if how == "reload" {
            await engine.reload(config: try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(
                #"{"authorization": {"default": "grant"}, "bursts": {"maxDeliveredPerApp": 1000}, "server": {"logNotificationsPerSecond": 5}}"#))))
            #expect(log.all.contains("100 notification lines not logged in the last 0.0 s; the flood is over (server.logNotificationsPerSecond changed) [N16]"),
                    "\(log.all.filter { $0.contains("[N16]") })")
            // The new budget: a burst of 50.
            for i in 0..<60 { _ = try await engine.addNotification(client: chat, AddNotificationParams(identifier: "new\(i)", title: "hi")) }
            #expect(log.all.filter { $0.hasPrefix("notification org.example.Chat/new") }.count == 50)
            #expect(log.all.last?.hasPrefix("notification lines over 5 a second") == true, "\(log.all.suffix(1))")
        } else {
            await engine.beginStopping()
            #expect(log.all.last == "100 notification lines not logged in the last 0.0 s; the flood is over (stopping) [N16]", "\(log.all.suffix(2))")
        }
    }

    /// A notification's sound's S1 warning is one of its lines within the budget (the thirteenth
    /// session's stranger: a flood from many apps, each with a sound the folders lack, logged
    /// the warning of each beside the budget's lines). 150 apps add one notification each at one
    /// instant, each sound replaced: 300 lines due, 200 written, 100 in the sum.
    @Test func aFloodsSoundWarningsAreWithinTheBudget_N16() async throws {
        let log = StoppingTests.Lines()
        let clock = ManualClock()
        let sounds = FakeSoundPlayer()
        sounds.replacement = WireError(.notFound, "no sound named nosuch in the sound folders [S1]")
        let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(#"{"authorization": {"default": "grant"}}"#)))
        let engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: sounds, clock: clock,
                                store: MemoryNotificationStore(), version: "test", log: log.append)
        for i in 0..<150 {
            let c = await engine.connect(pid: getpid(), sink: { _ in })
            _ = try await engine.hello(client: c, app: "org.example.App\(i)")
            _ = try await engine.requestAuthorization(client: c, RequestAuthorizationParams(options: [.alert, .sound]))
            _ = try await engine.addNotification(client: c, AddNotificationParams(identifier: "m", title: "hi", sound: "nosuch"))
        }
        let deadline = Date().addingTimeInterval(10)
        while sounds.plays.count < 150, Date() < deadline { try await Task.sleep(nanoseconds: 2_000_000) }
        #expect(sounds.plays.count == 150)
        clock.advance(by: 10)
        #expect(await Self.logged("100 notification lines not logged in the last 10.0 s; the flood is over [N16]", in: log),
                "\(log.all.filter { $0.contains("[N16]") })")
        let delivered = log.all.filter { $0.hasPrefix("notification org.example.App") }.count
        let warnings = log.all.filter { $0.hasPrefix("sound nosuch: ") && $0.hasSuffix("[S1]") }.count
        #expect(delivered + warnings == 200, "delivered \(delivered), S1 warnings \(warnings)")
        #expect(warnings > 0, "the warnings are written while within the budget")
    }

    /// An engine on a manual clock whose app added 300 notifications at one instant, at
    /// `server.logNotificationsPerSecond` `perSecond`.
    static func flooded(perSecond: Int) async throws -> (Engine, Int, StoppingTests.Lines, ManualClock) {
        let log = StoppingTests.Lines()
        let clock = ManualClock()
        let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(
            #"{"authorization": {"default": "grant"}, "bursts": {"maxDeliveredPerApp": 1000}, "server": {"logNotificationsPerSecond": \#(perSecond)}}"#)))
        let engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: FakeSoundPlayer(), clock: clock,
                                store: MemoryNotificationStore(), version: "test", log: log.append)
        let chat = await engine.connect(pid: getpid(), sink: { _ in })
        _ = try await engine.hello(client: chat, app: "org.example.Chat")
        _ = try await engine.requestAuthorization(client: chat, RequestAuthorizationParams(options: [.alert]))
        for i in 0..<300 { _ = try await engine.addNotification(client: chat, AddNotificationParams(identifier: "m\(i)", title: "hi")) }
        return (engine, chat, log, clock)
    }

    /// A5 in the log: a deactivation is said as an activation is, with `notifyOthers`; one of an
    /// inactive session (which does nothing) is not (a stranger read the log and found only the
    /// activations).
    @Test func aDeactivationIsLogged_A5() async throws {
        let log = StoppingTests.Lines()
        let engine = try Engine(config: try ConfigLoader.load(folders: []), audio: FakeAudioBackend(), sounds: FakeSoundPlayer(),
                                store: MemoryNotificationStore(), version: "test", log: log.append)
        let c = await engine.connect(pid: getpid(), sink: { _ in })
        _ = try await engine.hello(client: c, app: "org.example.Music")
        let music = try await engine.register(client: c, RegisterParams(category: .playback)).session
        _ = try await engine.activate(client: c, ActivateParams(session: music))
        try await engine.deactivate(client: c, DeactivateParams(session: music, notifyOthers: false))
        try await engine.deactivate(client: c, DeactivateParams(session: music))
        let said = log.all.filter { $0.hasPrefix("\(music) deactivate") }
        #expect(said == ["\(music) deactivate (active) notifyOthers=false [A5]"], "\(log.all)")
    }

    /// Whether `line` is logged within 5 s (the engine's timer runs on its own task).
    static func logged(_ line: String, in log: StoppingTests.Lines) async -> Bool {
        for _ in 0..<500 {
            if log.all.contains(line) { return true }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return false
    }
}
