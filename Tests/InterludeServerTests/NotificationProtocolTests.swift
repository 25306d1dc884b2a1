import Foundation
import Testing
import InterludeClient
import InterludeConfig
import InterludeEngine
import InterludePolicy
import InterludeServer
import InterludeTestSupport
import InterludeWire

/// The notification methods over a real socket, with a fake sound player and an in-memory store.
/// The rules themselves are proven in InterludePolicyTests; these prove the plumbing the issue
/// names: N3 downgrade + explain, N6 rejection code, N11 one sound for a burst, N15 save-before-reply.
@Suite(.serialized) struct NotificationProtocolTests {
    static let grant = #"{"authorization": {"default": "grant"}, "entitledCriticalApps": ["org.example.Alarm"]}"#

    func app(_ d: TestDaemon, _ id: String) async throws -> InterludeClient {
        let c = try await InterludeClient.connect(socket: d.socket, app: id)
        _ = try await c.call(NotificationMethod.requestAuthorization,
                             RequestAuthorizationParams(options: [.alert, .sound, .badge, .criticalAlert]), as: AuthorizationResult.self)
        return c
    }
    func add(_ c: InterludeClient, _ p: AddNotificationParams) async throws -> AddNotificationResult {
        try await c.call(NotificationMethod.add, p, as: AddNotificationResult.self)
    }

    @Test func N3_criticalFromAnAppWithoutEntitlementIsDeliveredAsActiveAndExplainSaysWhy() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let chat = try await app(d, "org.example.Chat")
        let r = try await add(chat, AddNotificationParams(identifier: "c1", title: "hi", sound: "default", level: .critical))
        #expect(r.decision.level == .active)
        #expect(r.decision.rules.contains("N3"))
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        let e = try await cli.call(NotificationMethod.explain, ExplainParams(identifier: "c1"), as: ExplainResult.self)
        #expect(e.app == "org.example.Chat")
        #expect(e.decision.rules.contains("N3"))
        // The entitled app's critical alert plays at its volume, marked critical.
        let alarm = try await app(d, "org.example.Alarm")
        let a = try await add(alarm, AddNotificationParams(identifier: "a1", title: "wake", sound: "default", criticalVolume: 0.8, level: .critical))
        #expect(a.decision.level == .critical)
        for _ in 0..<100 {
            guard !d.sounds.plays.contains(where: { $0.properties["interlude.critical"] == "1" }) else { break }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        let critical = d.sounds.plays.first { $0.properties["interlude.critical"] == "1" }
        #expect(critical?.volume == 0.8)
    }

    /// N17: an app's standalone sound, once the rules allow it, plays once (the policy's
    /// playSound effect and the request's own play must not both reach the player).
    @Test func N17_anAppsSoundPlayPlaysOnce() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let game = try await app(d, "org.example.Game")
        let r = try await game.call(WireMethod.soundPlay, SoundPlayParams(sound: "default", volume: 0.5), as: SoundPlayResult.self)
        #expect(r.played == "default")
        try await Task.sleep(nanoseconds: 300_000_000)   // a second play would be a task of the engine's
        let plays = d.sounds.plays.filter { $0.properties["application.id"] == "org.example.Game" }
        #expect(plays.count == 1, "\(plays.map { "\($0.name)@\($0.volume) \($0.properties)" })")
    }

    /// N11 counts what was heard: an app's sound that failed (the audio server away) does not
    /// make its next sound within the second `rateLimited`; one that played does.
    @Test func N11_aSoundPlayThatFailedDoesNotHoldTheNextOneBack() async throws {
        // No cooldown steps: only the one-audible-alert-per-interval limit is at work, its interval
        // a minute so that a stall of the test (it took 1.6 s once, in a parallel run) cannot let
        // the third sound through.
        let d = try TestDaemon(overlay: #"{"authorization": {"default": "grant"}, "bursts": {"cooldown": [], "audibleAlertInterval": 60}}"#)
        let game = try await app(d, "org.example.Game")
        d.sounds.failure = WireError(.audioUnavailable, "the audio server is away")
        let failed = await #expect(throws: WireError.self) {
            _ = try await game.call(WireMethod.soundPlay, SoundPlayParams(sound: "default"), as: SoundPlayResult.self)
        }
        #expect(failed?.code == .audioUnavailable)
        d.sounds.failure = nil
        let r = try await game.call(WireMethod.soundPlay, SoundPlayParams(sound: "default"), as: SoundPlayResult.self)
        #expect(r.played == "default")
        let limited = await #expect(throws: WireError.self) {
            _ = try await game.call(WireMethod.soundPlay, SoundPlayParams(sound: "default"), as: SoundPlayResult.self)
        }
        #expect(limited?.code == .rateLimited)
    }

    @Test func N6_promotionalTimeSensitiveIsRejected() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let shop = try await app(d, "org.example.Shop")
        await #expect(throws: WireError.self) {
            _ = try await add(shop, AddNotificationParams(title: "sale", level: .timeSensitive, promotional: true))
        }
        do { _ = try await add(shop, AddNotificationParams(title: "sale", level: .timeSensitive, promotional: true)) } catch let e as WireError {
            #expect(e.code == .promotionalNotAllowed)
        }
    }

    @Test func N11_twentyInTwoSecondsMakeOneFullVolumeSoundAndAllReachTheCenter() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let chat = try await app(d, "org.example.Chat")
        for i in 0..<20 {
            _ = try await add(chat, AddNotificationParams(identifier: "m\(i)", title: "message \(i)", sound: "default"))
            try await Task.sleep(nanoseconds: 90_000_000)
        }
        try await Task.sleep(nanoseconds: 200_000_000)
        let audible = d.sounds.plays.filter { $0.volume > 0 }
        #expect(audible.count == 1)
        #expect(audible.first?.volume == 1)
        let list = try await chat.call(NotificationMethod.delivered, ListNotificationsParams(), as: NotificationListResult.self)
        #expect(list.notifications.count == 20)
    }

    @Test func N15_stateIsSavedBeforeTheReply() async throws {
        let store = MemoryNotificationStore()
        let d = try TestDaemon(store: store, overlay: Self.grant)
        let chat = try await app(d, "org.example.Chat")
        _ = try await add(chat, AddNotificationParams(identifier: "keep", title: "saved", trigger: TriggerParams(in: 3600)))
        #expect(store.saved.pending.contains { $0.request.identifier == "keep" })
        // A daemon started on the saved state still has it.
        let again = try TestDaemon(store: MemoryNotificationStore(store.saved), overlay: Self.grant)
        let cli = try await InterludeClient.connect(socket: again.socket, app: Engine.userToolApp)
        let list = try await cli.call(NotificationMethod.pending, ListNotificationsParams(all: true), as: NotificationListResult.self)
        #expect(list.pending.map(\.identifier) == ["keep"])
    }

    /// N8: an `at` trigger fires at its time. The engine turns it into an interval from the time
    /// the policy decides at; taken from a later clock reading it fired (and was listed and
    /// logged) early: `--at 23:00:00Z` said `held until 22:59:59`. Here the wall clock moves
    /// 0.25 s at every reading, so any second reading shows.
    @Test func N8_anAtTriggerFiresAtItsTimeNotBeforeIt() async throws {
        let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(Self.grant)))
        let engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: FakeSoundPlayer(), clock: TickingClock(),
                                store: MemoryNotificationStore(), version: "test")
        let dir = NSTemporaryDirectory() + "interlude-at-\(UUID().uuidString.prefix(8))"
        let server = SocketServer(path: dir + "/socket", engine: engine, maxOutputBytes: 1 << 20, log: { _ in })
        try server.start()
        defer { server.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let chat = try await connectAuthorizedApps(socket: dir + "/socket", ["org.example.Calendar"])[0]
        let at = TickingClock.start + 3600
        let r = try await add(chat, AddNotificationParams(identifier: "meeting", title: "standup", trigger: TriggerParams(at: at)))
        guard case let .held(until?) = r.decision.outcome else { Issue.record("not held: \(r.decision.outcome)"); return }
        #expect(abs(until.secondsSince1970 - at) < 1e-6, "held until \(until.iso8601), asked for \(NotificationTime(at).iso8601)")
        let cli = try await InterludeClient.connect(socket: dir + "/socket", app: Engine.userToolApp)
        let list = try await cli.call(NotificationMethod.pending, ListNotificationsParams(all: true), as: NotificationListResult.self)
        #expect(list.pending.map(\.fireAt).allSatisfy { abs($0 - at) < 1e-6 }, "\(list.pending.map(\.fireAt))")
    }

    @Test func N1_appsMayNotChangeTheirOwnSettingsOrOthersNotifications() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let chat = try await app(d, "org.example.Chat")
        var p = SettingsParams(app: "org.example.Chat")
        p.criticalAlerts = true
        await #expect(throws: WireError.self) { _ = try await chat.call(NotificationMethod.setSettings, p, as: NotificationAppSettings.self) }
        await #expect(throws: WireError.self) {
            _ = try await chat.call(NotificationMethod.delivered, ListNotificationsParams(app: "org.example.Other"), as: NotificationListResult.self)
        }
    }

    @Test func N7_focusFromTheUserSilencesAnOrdinaryNotification() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        let f = try await cli.call(NotificationMethod.focusSet, FocusSetParams(name: "sleep"), as: FocusStatusResult.self)
        #expect(f.focus == "sleep")
        let chat = try await app(d, "org.example.Chat")
        let r = try await add(chat, AddNotificationParams(identifier: "n1", title: "hi", sound: "default"))
        #expect(r.decision.sound == nil)
        #expect(r.decision.rules.contains("N7"))
    }

    @Test func N13_watchersSeeThePlaceholderWhenPreviewsAreHidden() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        var p = SettingsParams(app: "org.example.Chat")
        p.showPreviews = .never
        _ = try await cli.call(NotificationMethod.setSettings, p, as: NotificationAppSettings.self)
        try await cli.subscribe()
        let chat = try await app(d, "org.example.Chat")
        // A secret no number can spell: "1234" once matched the digits of an event's time stamp.
        _ = try await add(chat, AddNotificationParams(identifier: "secret", title: "From Ann", body: "the code is ZEBRA-QUARTZ"))
        let seen = await withTaskGroup(of: WireEvent?.self) { g in
            g.addTask { for await e in cli.events where e.event == NotificationEventName.delivered { return e }; return nil }
            g.addTask { try? await Task.sleep(nanoseconds: 2_000_000_000); return nil }
            let first = await g.next()!
            g.cancelAll()
            return first
        }
        #expect(seen?.data["notification"]?["body"] == .string("Notification"))
        #expect(seen.map { "\($0.data)" }?.contains("ZEBRA") == false)
    }

    @Test func N12_listingsCarryTheBadgeAndRemoveSaysWhatWentAway() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let chat = try await app(d, "org.example.Chat")
        _ = try await add(chat, AddNotificationParams(identifier: "m1", title: "one"))
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        _ = try await cli.call(NotificationMethod.setBadge, SetBadgeParams(app: "org.example.Chat", count: 3), as: JSONValue.self)
        let one = try await cli.call(NotificationMethod.delivered, ListNotificationsParams(app: "org.example.Chat"), as: NotificationListResult.self)
        #expect(one.badges == ["org.example.Chat": 3])
        let quiet = try await cli.call(NotificationMethod.delivered, ListNotificationsParams(app: "org.example.Quiet"), as: NotificationListResult.self)
        #expect(quiet.badges == ["org.example.Quiet": 0])
        let all = try await cli.call(NotificationMethod.delivered, ListNotificationsParams(all: true), as: NotificationListResult.self)
        #expect(all.badges == ["org.example.Chat": 3])

        let gone = try await cli.call(NotificationMethod.remove, RemoveNotificationsParams(app: "org.example.Chat", delivered: ["m1", "nope"]),
                                      as: RemoveNotificationsResult.self)
        #expect(gone.removed == ["m1"])
        let again = try await cli.call(NotificationMethod.remove, RemoveNotificationsParams(app: "org.example.Chat", delivered: ["m1"]),
                                       as: RemoveNotificationsResult.self)
        #expect(again.removed.isEmpty)
        // The badge belongs to the app (N12): removing notifications does not change it.
        let after = try await chat.call(NotificationMethod.delivered, ListNotificationsParams(), as: NotificationListResult.self)
        #expect(after.badges == ["org.example.Chat": 3])
    }

    @Test func theUsersToolMayNotNameAnInvalidAppId() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        for bad in ["bad app", "", "tab\there"] {
            var p = SettingsParams(app: bad)
            p.sound = false
            let e = await #expect(throws: WireError.self) { _ = try await cli.call(NotificationMethod.setSettings, p, as: NotificationAppSettings.self) }
            #expect(e?.code == .badRequest, "\(bad)")
            let l = await #expect(throws: WireError.self) {
                _ = try await cli.call(NotificationMethod.delivered, ListNotificationsParams(app: bad), as: NotificationListResult.self)
            }
            #expect(l?.code == .badRequest, "\(bad)")
        }
    }

    @Test func N15_aStateThatCannotBeSavedIsNotAcknowledged() async throws {
        let store = MemoryNotificationStore()
        let d = try TestDaemon(store: store, overlay: Self.grant)
        let chat = try await app(d, "org.example.Chat")
        store.failing = true
        let e = await #expect(throws: WireError.self) { _ = try await add(chat, AddNotificationParams(identifier: "lost", title: "t")) }
        #expect(e?.code == .storageFailed)
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        let r = await #expect(throws: WireError.self) { try await cli.setRinger(silent: true) }
        #expect(r?.code == .storageFailed)
        #expect(try await chat.status().ringer == "ring")
        store.failing = false
        let list = try await chat.call(NotificationMethod.delivered, ListNotificationsParams(), as: NotificationListResult.self)
        #expect(list.notifications.isEmpty, "nothing unsaved is in the center")
        _ = try await add(chat, AddNotificationParams(identifier: "kept", title: "t"))
        #expect(store.saved.delivered.map(\.request.identifier) == ["kept"])
    }

    @Test func N15_connectingAndLeavingCostNoSave() async throws {
        let store = MemoryNotificationStore()
        let d = try TestDaemon(store: store, overlay: Self.grant)
        let chat = try await app(d, "org.example.Chat")  // the first hello records the app: saved
        _ = try await add(chat, AddNotificationParams(identifier: "m1", title: "t"))
        let saves = store.saves
        for _ in 0..<5 {
            let again = try await InterludeClient.connect(socket: d.socket, app: "org.example.Chat")
            _ = try await again.status()
            again.close()
        }
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(store.saves == saves, "presence is not persisted (N15 keeps only what was acknowledged)")
    }

    @Test func N2_theUsersToolsAreTheConfiguredOnes() async throws {
        let d = try TestDaemon(overlay: #"{"server": {"userTools": ["org.example.Settings"]}}"#)
        var p = SettingsParams(app: "org.example.Chat")
        p.sound = false
        let panel = try await InterludeClient.connect(socket: d.socket, app: "org.example.Settings")
        let s = try await panel.call(NotificationMethod.setSettings, p, as: NotificationAppSettings.self)
        #expect(s.sound == false)
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        let e = await #expect(throws: WireError.self) { _ = try await cli.call(NotificationMethod.setSettings, p, as: NotificationAppSettings.self) }
        #expect(e?.code == .notAuthorized, "org.interlude.CLI is not in this config's userTools")
    }

    @Test func N16_explainWithoutAppRefusesAnAmbiguousIdentifierAndAnEmptySoundIsRefused() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let mail = try await app(d, "org.example.Mail")
        let chat = try await app(d, "org.example.Chat")
        _ = try await add(mail, AddNotificationParams(identifier: "a1", title: "t"))
        _ = try await add(chat, AddNotificationParams(identifier: "a1", title: "t"))
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        let e = await #expect(throws: WireError.self) { _ = try await cli.call(NotificationMethod.explain, ExplainParams(identifier: "a1"), as: ExplainResult.self) }
        #expect(e?.message.contains("org.example.Chat, org.example.Mail") == true, "\(e?.message ?? "")")
        let named = try await cli.call(NotificationMethod.explain, ExplainParams(app: "org.example.Mail", identifier: "a1"), as: ExplainResult.self)
        #expect(named.app == "org.example.Mail")
        let empty = await #expect(throws: WireError.self) { _ = try await add(chat, AddNotificationParams(title: "t", sound: "")) }
        #expect(empty?.code == .badRequest)
        // sound.play with an empty name is refused for the user's tool too (it played the default).
        for client in [chat, cli] {
            let play = await #expect(throws: WireError.self) { _ = try await client.play("") }
            #expect(play?.code == .badRequest && play?.message == #"sound.play: param "sound" must be a sound name or a path, not empty"#,
                    "\(String(describing: play))")
        }
    }

    @Test func A12_theRingerSwitchSurvivesARestart() async throws {
        let store = MemoryNotificationStore()
        let d = try TestDaemon(store: store, overlay: Self.grant)
        await d.start()
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        try await cli.setRinger(silent: true)
        let again = try TestDaemon(store: MemoryNotificationStore(store.saved), overlay: Self.grant)
        await again.start()
        let cli2 = try await InterludeClient.connect(socket: again.socket, app: Engine.userToolApp)
        #expect(try await cli2.status().ringer == "silent")
    }

    @Test func N8_timesBeyondTenYearsAreRefusedAndTheDaemonLives() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let chat = try await app(d, "org.example.Chat")
        for trigger in [TriggerParams(in: 1e300), TriggerParams(in: 2e10), TriggerParams(at: 1e300),
                        TriggerParams(calendar: NotificationCalendarMatch(year: 9999, month: 1, day: 1))] {
            let e = await #expect(throws: WireError.self) { _ = try await add(chat, AddNotificationParams(title: "t", trigger: trigger)) }
            #expect(e?.code == .badRequest, "\(trigger)")
        }
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        for p in [FocusSetParams(name: "sleep", for: 1e300), FocusSetParams(name: "sleep", until: 1e300)] {
            let e = await #expect(throws: WireError.self) { _ = try await cli.call(NotificationMethod.focusSet, p, as: FocusStatusResult.self) }
            #expect(e?.code == .badRequest)
        }
        #expect(try await cli.status().version == "test")
    }

    /// N7: `until` and `for` end a focus being turned on; with `name` null (focus off) they are
    /// refused, not ignored, and the focus in effect stays.
    @Test func N7_focusOffWithAnEndIsBadRequest() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        _ = try await cli.call(NotificationMethod.focusSet, FocusSetParams(name: "sleep"), as: FocusStatusResult.self)
        for p in [FocusSetParams(name: nil, for: 60), FocusSetParams(name: nil, until: Date().timeIntervalSince1970 + 60)] {
            let e = await #expect(throws: WireError.self) { _ = try await cli.call(NotificationMethod.focusSet, p, as: FocusStatusResult.self) }
            #expect(e?.code == .badRequest && e?.message.contains("name null") == true, "\(String(describing: e))")
        }
        let status = try await cli.call(NotificationMethod.focusStatus, StatusParams(), as: FocusStatusResult.self)
        #expect(status.focus == "sleep")
    }
}

/// The engine's real clock sleeps towards any deadline without trapping: a distant one (a day at a
/// time, cancellable), an infinite one, a NaN one (returns at once).
@Suite struct SystemClockTests {
    @Test(arguments: [1e300, Double.infinity])
    func aDistantDeadlineSleepsAndCanBeCancelled(ahead: Double) async throws {
        let clock = SystemClock()
        let t = Task { try await clock.sleep(until: clock.now + ahead) }
        try await Task.sleep(nanoseconds: 50_000_000)
        t.cancel()
        await #expect(throws: CancellationError.self) { try await t.value }
    }

    @Test func aNaNDeadlineReturnsAtOnce() async throws {
        let clock = SystemClock()
        let t0 = clock.now
        try await clock.sleep(until: .nan)
        #expect(clock.now - t0 < 0.5)
    }
}


/// A wall clock that moves 0.25 s at every reading (the monotonic one stands still): two readings
/// where one was meant show as a quarter second apart.
final class TickingClock: EngineClock, @unchecked Sendable {
    static let start = 1_796_000_000.0
    private let lock = NSLock()
    private var wall = TickingClock.start
    var now: Double { 1000 }
    var wallTime: Double { lock.withLock { wall += 0.25; return wall } }
    func sleep(until deadline: Double) async throws { try await Task.sleep(nanoseconds: 3_600_000_000_000) }
}
