import Foundation
import Testing
import Synchronization
import InterludeClient
import InterludeEngine
import InterludePolicy
import InterludeTestSupport
import InterludeWire

/// Issue 7, holes 8 and 9, over real socket connections: an app learns only about itself (its
/// notifications, decisions, sounds, sessions, the user's responses to it, N14), the user's tools
/// (`server.userTools`) see everything with hidden previews still applied (N13), and only the
/// user's tools may set the ringer (A12).
@Suite(.serialized) struct PrivacyTests {
    static let grant = #"{"authorization": {"default": "grant"}}"#

    func app(_ d: TestDaemon, _ id: String) async throws -> InterludeClient {
        let c = try await InterludeClient.connect(socket: d.socket, app: id)
        _ = try await c.call(NotificationMethod.requestAuthorization,
                             RequestAuthorizationParams(options: [.alert, .sound, .badge]), as: AuthorizationResult.self)
        return c
    }

    /// The events `c` receives until one for which `last` holds (included), at most `timeout` s.
    /// Events on one connection are written in the order the engine makes them, so everything the
    /// engine sent this connection before the sentinel is in the list.
    func events(_ c: InterludeClient, until last: @escaping @Sendable (WireEvent) -> Bool, timeout: Double = 5) async -> [WireEvent] {
        await withTaskGroup(of: [WireEvent]?.self) { g in
            g.addTask {
                var seen: [WireEvent] = []
                for await e in c.events {
                    seen.append(e)
                    if last(e) { return seen }
                }
                return seen
            }
            g.addTask { try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9)); return nil }
            let first = await g.next()!
            g.cancelAll()
            return first ?? []
        }
    }

    @Test func anotherAppsSubscriptionGetsNoneOfAnAppsNotificationsOrTheUsersReplies() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let user = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        try await user.subscribe()
        let spy = try await app(d, "org.example.Spy")
        try await spy.subscribe()
        let chat = try await app(d, "org.example.Chat")
        // Chat's previews are hidden (N13); it has a reply action (N14).
        var hide = SettingsParams(app: "org.example.Chat")
        hide.showPreviews = .never
        _ = try await user.call(NotificationMethod.setSettings, hide, as: NotificationAppSettings.self)
        _ = try await chat.call(NotificationMethod.registerCategories, RegisterCategoriesParams(categories: [
            NotificationCategory(identifier: "message", actions: [NotificationAction(identifier: "reply", title: "Reply", textInputPlaceholder: "Message")]),
        ]), as: JSONValue.self)
        _ = try await chat.call(NotificationMethod.add, AddNotificationParams(
            identifier: "c1", title: "Ann", body: "the code is ZEBRA-QUARTZ", sound: "default", category: "message"), as: AddNotificationResult.self)
        _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "c2", title: "Ann", body: "secret two"),
                                as: AddNotificationResult.self)
        _ = try await user.call(NotificationMethod.respond, RespondParams(app: "org.example.Chat", notification: "c1", action: "reply",
                                                                          text: "typed reply OKAPI-WALTZ"), as: JSONValue.self)
        _ = try await user.call(NotificationMethod.remove, RemoveNotificationsParams(app: "org.example.Chat", delivered: ["c2"]),
                                as: RemoveNotificationsResult.self)
        _ = try await user.call(NotificationMethod.setBadge, SetBadgeParams(app: "org.example.Chat", count: 7), as: JSONValue.self)
        // Chat's scheduled request makes a decision event (N8, N16).
        _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "later", title: "Ann later", body: "secret ZEBRA-QUARTZ",
                                                                              trigger: TriggerParams(in: 3600)), as: AddNotificationResult.self)
        // The sentinel: the spy's own notification, sent after everything above.
        _ = try await spy.call(NotificationMethod.add, AddNotificationParams(identifier: "mine", title: "mine"), as: AddNotificationResult.self)
        let spied = await events(spy) { $0.event == NotificationEventName.delivered && $0.data["notification"]?["identifier"] == .string("mine") }
        #expect(spied.last?.data["notification"]?["identifier"] == .string("mine"), "the sentinel arrived: \(spied.map(\.event))")
        let leaked = spied.filter { "\($0.data)".contains("Chat") || "\($0.data)".contains("ZEBRA") || "\($0.data)".contains("OKAPI") }
        #expect(leaked.isEmpty, "the spy saw Chat's events: \(leaked.map { "\($0.event) \($0.data)" })")

        // The user's tool saw all of it, with the body hidden (N13) and the typed reply (N14).
        // Until the sentinel and a sound: a sound's event comes when it has played, which on a
        // loaded machine (the suites run in parallel) can be after the sentinel's delivery.
        let sawSentinel = Mutex(false), sawSound = Mutex(false)
        let seen = await events(user) { e in
            if e.event == NotificationEventName.delivered && e.data["notification"]?["identifier"] == .string("mine") { sawSentinel.withLock { $0 = true } }
            if e.event == WireEventName.soundPlayed { sawSound.withLock { $0 = true } }
            return sawSentinel.withLock { $0 } && sawSound.withLock { $0 }
        }
        let names = seen.map(\.event)
        for name in [NotificationEventName.delivered, NotificationEventName.removed, NotificationEventName.actionResponse,
                     NotificationEventName.badgeChanged, NotificationEventName.decided, NotificationEventName.settingsChanged,
                     WireEventName.soundPlayed] {
            #expect(names.contains(name), "the user's tool got \(name): \(names)")
        }
        let delivered = seen.filter { $0.event == NotificationEventName.delivered && $0.data["notification"]?["app"] == .string("org.example.Chat") }
        #expect(delivered.count == 2)
        #expect(delivered.allSatisfy { $0.data["notification"]?["body"] == .string("Notification") }, "N13 applies to the user's tools")
        #expect(!seen.contains { "\($0.data)".contains("ZEBRA") }, "no hidden body reaches the user's tool")
        #expect(seen.contains { $0.event == NotificationEventName.actionResponse && "\($0.data)".contains("typed reply OKAPI-WALTZ") })

        // Chat itself got its response (N14) and its own events.
        let own = await events(chat) { $0.event == NotificationEventName.actionResponse }
        #expect(own.last?.data["text"] == .string("typed reply OKAPI-WALTZ"))
    }

    @Test func anotherAppsSubscriptionGetsNoneOfAnAppsAudioEventsButTheUsersToolDoes() async throws {
        let d = try TestDaemon()
        let user = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        try await user.subscribe()
        let spy = try await InterludeClient.connect(socket: d.socket, app: "org.example.Spy")
        try await spy.subscribe()
        let music = try await InterludeClient.connect(socket: d.socket, app: "org.example.Music")
        let radio = try await InterludeClient.connect(socket: d.socket, app: "org.example.Radio")
        let m = try await music.register(category: .playback)
        _ = try await music.activate(m)
        let r = try await radio.register(category: .playback)
        _ = try await radio.activate(r)  // A1: music is interrupted
        // Sentinel: the spy's own session is interrupted by a session of its own app.
        let s1 = try await spy.register(category: .playback)
        _ = try await spy.activate(s1)
        let s2 = try await spy.register(category: .playback)
        _ = try await spy.activate(s2)
        let spied = await events(spy) { $0.event == WireEventName.interruptionBegan && $0.data["session"] == .string(s1.rawValue) }
        #expect(spied.last?.data["session"] == .string(s1.rawValue), "the sentinel arrived: \(spied.map(\.event))")
        #expect(!spied.contains { $0.data["session"] == .string(m.rawValue) }, "the spy saw Music's interruption: \(spied)")
        let seen = await events(user) { $0.event == WireEventName.interruptionBegan && $0.data["session"] == .string(m.rawValue) }
        #expect(seen.last?.data["session"] == .string(m.rawValue), "interlude watch still sees every session's events")
    }

    @Test func A12_onlyTheUsersToolsSetTheRinger() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let chat = try await app(d, "org.example.Chat")
        let e = await #expect(throws: WireError.self) { try await chat.setRinger(silent: true) }
        #expect(e?.code == .notAuthorized)
        #expect(e?.message.contains("interlude CLI") == true, "\(e?.message ?? "")")
        #expect(try await chat.status().ringer == "ring", "nothing changed")
        let user = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        try await user.setRinger(silent: true)
        #expect(try await chat.status().ringer == "silent")
    }

    /// `maxApps` over the socket: a new app beyond the bound takes the place of an app that left
    /// and held nothing (the least recently seen), and only the user's tools hear of it
    /// (`appForgotten`): a subscribed app does not learn which other apps the daemon knew. The
    /// forgotten app comes back by asking again.
    @Test func aForgottenAppIsToldToTheUsersToolsOnly() async throws {
        let d = try TestDaemon(overlay: #"{ authorization: { default: "grant" }, maxApps: 4 }"#)
        let user = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        try await user.subscribe()
        let spy = try await app(d, "org.example.Spy")
        try await spy.subscribe()
        for gone in ["org.example.Old", "org.example.Mid"] { try await app(d, gone).close() }
        // The new app's request, once both have been seen leaving (until then each holds a connection).
        var reply: Result<AuthorizationResult, any Error>?
        for _ in 0..<200 {
            let new = try await InterludeClient.connect(socket: d.socket, app: "org.example.New")
            do {
                reply = .success(try await new.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]),
                                                    as: AuthorizationResult.self))
            } catch {
                reply = .failure(error)
            }
            new.close()
            if case .failure(let e as WireError) = reply, e.code == .limitReached { try await Task.sleep(nanoseconds: 10_000_000); continue }
            break
        }
        #expect(try reply?.get().status == .authorized, "\(String(describing: reply))")
        let heard = await events(user) { $0.event == NotificationEventName.appForgotten }
        #expect(heard.last?.data == .object(["app": .string("org.example.Old")]), "\(heard.map(\.event))")
        // A global switch after it reaches every subscriber: what the spy got before it is all it got.
        try await user.setRinger(silent: true)
        let spied = await events(spy) { $0.event == WireEventName.ringerChanged }
        #expect(spied.last?.event == WireEventName.ringerChanged && !spied.contains { $0.event == NotificationEventName.appForgotten },
                "\(spied.map(\.event))")
        #expect(try await app(d, "org.example.Old").call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]),
                                                         as: AuthorizationResult.self).status == .authorized, "it comes back by asking")
    }
}
