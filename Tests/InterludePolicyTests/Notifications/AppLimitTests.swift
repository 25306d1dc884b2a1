import Foundation
import InterludePolicy
import Testing

/// The bound on app records (`maxApps`): any D-Bus client names the app of its notifications, and
/// every app said once was kept for ever, on disk too (left by several sessions as "app records
/// unbounded"). A new app beyond the bound takes the place of the least recently seen record that
/// holds no choice of the user's and nothing waiting; when none may go, it is refused with
/// `limitReached`, and nothing is forgotten.
@Suite struct AppLimitTests {
    static let apps = ["org.example.A", "org.example.B", "org.example.C"]

    /// Three apps asked for authorization in turn (answered by the default `grant`), under a
    /// bound of three.
    static func threeAppsSeen(maxApps: Int = 3) -> NotificationHarness {
        var h = NotificationHarness(config: NotificationPolicyConfig(authorization: .init(default: .grant), maxApps: maxApps, timeZone: "UTC"))
        for app in apps {
            h.authorize(app)
            h.advance(10)
        }
        return h
    }

    static func forgotten(_ effects: [NotificationEffect]) -> [String] {
        effects.compactMap { if case let .emit(.appForgotten(app)) = $0 { app } else { nil } }
    }

    @Test func aNewAppTakesThePlaceOfTheLeastRecentlySeenRecordThatHoldsNothing() {
        var h = Self.threeAppsSeen()
        h.authorize("org.example.D")
        #expect(h.reply == .authorization(status: .authorized, options: [.alert, .sound, .badge]))
        #expect(Self.forgotten(h.all) == ["org.example.A"])
        #expect(Set(h.state.apps.keys) == ["org.example.B", "org.example.C", "org.example.D"])
        // Asking again makes an app recently seen: C is now the oldest after B goes.
        h.advance(10)
        h.authorize("org.example.B")
        h.advance(10)
        h.authorize("org.example.A")
        #expect(Self.forgotten(h.all) == ["org.example.A", "org.example.C"], "B asked again, so C was the least recently seen")
        #expect(h.state.apps["org.example.A"]?.lastSeen == h.now, "a record made again is seen now")
        #expect(h.state.apps.count == 3)
    }

    /// What keeps a record: each row gives the oldest app (A) something of the user's or something
    /// waiting, and the new app's record then takes B's place instead of A's.
    @Test(arguments: [
        "a setting of the user's", "the user's authorization", "a notification in the center",
        "one waiting for its trigger", "a connection", "a queued action response",
    ])
    func whatTheUserChoseOrWhatWaitsKeepsARecord(_ what: String) {
        var h = Self.threeAppsSeen(maxApps: 4)
        let a = "org.example.A"
        switch what {
        case "a setting of the user's": h.send(.setSettings(app: a, NotificationSettingsChange(sound: false)))
        case "the user's authorization": h.send(.setSettings(app: a, NotificationSettingsChange(authorization: .authorized)))
        case "a notification in the center": h.post("n1", from: a)
        case "one waiting for its trigger": h.post("later", from: a, trigger: .interval(seconds: 3600, repeats: false))
        case "a connection": h.send(.appConnected(app: a))
        default:
            // Answered while the app is away: the response waits for it (N14).
            h.send(.registerCategories(app: a, [.init(identifier: "msg", actions: [.init(identifier: "ok", title: "OK")])]))
            h.post("n1", from: a, NotificationContent(title: "t", body: "b", categoryIdentifier: "msg"))
            h.send(.respondToAction(app: a, notificationIdentifier: "n1", actionIdentifier: "ok", text: nil))
            #expect(h.state.apps[a]?.queuedResponses.count == 1)
        }
        #expect(h.errorCode == nil, "\(what): \(String(describing: h.reply))")
        h.authorize("org.example.Filler")  // the fourth record: under the bound, nothing goes
        #expect(Self.forgotten(h.all).isEmpty)
        h.authorize("org.example.D")
        #expect(Self.forgotten(h.last) == ["org.example.B"], "\(what) keeps A's record")
        #expect(h.state.apps[a] != nil)
    }

    /// What the app declared itself does not keep its record: it declares it again when it comes
    /// back, as after a reinstall. Else any app could make records that never go, under as many
    /// names as it likes (a stranger's find: 20 names with an empty category list, or a remote
    /// registration turned off, filled a bound of 20 for good, across restarts).
    @Test(arguments: ["a badge", "categories", "a remote registration", "a remote registration turned off"])
    func whatTheAppDeclaredDoesNotKeepARecord(_ what: String) {
        var h = Self.threeAppsSeen(maxApps: 3)
        let a = "org.example.A"
        switch what {
        case "a badge": h.send(.setBadge(app: a, count: 3))
        case "categories": h.send(.registerCategories(app: a, [.init(identifier: "msg", actions: [.init(identifier: "ok", title: "OK")])]))
        case "a remote registration": h.send(.registerRemote(app: a, enabled: true))
        default: h.send(.registerRemote(app: a, enabled: false))
        }
        #expect(h.errorCode == nil, "\(what): \(String(describing: h.reply))")
        h.authorize("org.example.D")
        #expect(Self.forgotten(h.last) == [a], "\(what)")
        // Back, it declares again what it needs: a request for authorization first (N1).
        #expect(h.post("n1", from: a) != nil && h.errorCode == .notAuthorized)
        h.authorize(a)
        #expect(h.post("n1", from: a) != nil && h.errorCode == nil)
    }

    /// An app that connects gets its record even with no room (it may not go while connected, and
    /// connections are bounded): an app that said `hello` while every record held something was
    /// given none, then a record marked not connected when it asked for authorization, and the
    /// next new app took its place while it was connected (a stranger's find).
    @Test func anAppThatConnectsWhenNoRecordMayGoIsKeptWhileConnected() {
        var h = Self.threeAppsSeen()
        for app in Self.apps { h.send(.appConnected(app: app)) }
        h.send(.appConnected(app: "org.example.Late"))
        #expect(h.state.apps["org.example.Late"]?.connected == true && h.state.apps.count == 4, "past the bound, by a connected app")
        h.send(.appDisconnected(app: "org.example.A"))
        h.authorize("org.example.Late")
        h.authorize("org.example.New")
        #expect(h.errorCode == .limitReached, "four records and a bound of three: two must go for a new one, one may")
        h.send(.appDisconnected(app: "org.example.B"))
        h.authorize("org.example.New")
        #expect(h.errorCode == nil && Self.forgotten(h.all) == ["org.example.A", "org.example.B"], "those that left, not the one connected")
        #expect(h.state.apps["org.example.Late"] != nil && h.state.apps.count == 3)
        #expect(h.post("n1", from: "org.example.Late") != nil && h.errorCode == nil)
    }

    /// Records kept past the bound (connected apps) do not stop the others from going: with the
    /// records that may not go at the bound, each new app that connected and left added a record
    /// for good (a stranger's find: 103 records at a bound of 3).
    @Test func recordsKeptPastTheBoundDoNotStopOthersFromGoing() {
        var h = Self.threeAppsSeen()
        for app in Self.apps { h.send(.setSettings(app: app, NotificationSettingsChange(sound: false))) }
        for i in 0..<20 {
            h.send(.appConnected(app: "org.example.K\(i)"))
            h.authorize("org.example.K\(i)")
            h.send(.appDisconnected(app: "org.example.K\(i)"))
        }
        #expect(h.state.apps.count <= 4, "\(h.state.apps.count) records")
        #expect(Self.forgotten(h.all).count == 19)
    }

    /// When no record may go, the new app is refused and nothing is forgotten. The apps known
    /// keep working.
    @Test func withNothingToForgetANewAppIsLimitReached() {
        var h = Self.threeAppsSeen()
        for app in Self.apps { h.send(.setSettings(app: app, NotificationSettingsChange(showPreviews: .never))) }
        let before = h.state.apps
        h.authorize("org.example.D")
        #expect(h.errorCode == .limitReached)
        if case let .failed(_, message, _)? = h.reply { #expect(message.contains("maxApps")) }
        h.send(.registerCategories(app: "org.example.F", [.init(identifier: "msg")]))
        #expect(h.errorCode == .limitReached)
        h.send(.setSettings(app: "org.example.G", NotificationSettingsChange(sound: false)))
        #expect(h.errorCode == .limitReached, "the user's setting for an app not known yet too")
        #expect(h.state.apps == before, "nothing forgotten, nothing added")
        #expect(Self.forgotten(h.all).isEmpty)
        #expect(h.post("n1", from: "org.example.B") != nil && h.errorCode == nil, "a known app still delivers")
    }

    /// A D-Bus app's record (made by `busAppSeen`; the bus does not connect it) goes once its
    /// notifications left the center, and its next `Notify` makes the same record again. The
    /// user's responses to it are not queued: the bus tells it (`ActionInvoked`).
    @Test func aBusAppsRecordGoesWhenItHoldsNothingAndComesBackTheSame() {
        var h = NotificationHarness(config: NotificationPolicyConfig(maxApps: 2, timeZone: "UTC"))
        let bus = "org.example.Chat"
        func busNotify(_ app: String) {
            // What the engine sends for a bus notification of a new app (Engine.authorizeBusApp).
            h.send(.busAppSeen(app: app, answer: .authorized))
            if h.state.apps[app]?.requestedOptions == nil { h.send(.requestAuthorization(app: app, options: [.alert, .sound, .badge])) }
        }
        busNotify(bus)
        let made = h.state.apps[bus]
        #expect(made?.viaBus == true && made?.answeredByDefault == true && made?.settings.authorization == .authorized && made?.connected == false)
        h.send(.registerCategories(app: bus, [.init(identifier: "dbus-1", actions: [.init(identifier: "ok", title: "OK")])]))
        h.post("dbus-1", from: bus, NotificationContent(title: "t", body: "b", categoryIdentifier: "dbus-1"))
        h.send(.respondToAction(app: bus, notificationIdentifier: "dbus-1", actionIdentifier: "ok", text: nil))
        #expect(h.state.apps[bus]?.queuedResponses.isEmpty == true && h.state.delivered.isEmpty, "answered, not queued; it left the center")
        #expect(h.state.apps[bus]?.badge == 1, "N12 counted it up")
        h.advance(10)
        h.send(.requestAuthorization(app: "org.example.Socket", options: [.alert]))  // undetermined (prompt): may go too
        h.advance(10)
        busNotify("org.example.Other")
        #expect(Self.forgotten(h.all) == [bus], "the bus app was the least recently seen")
        h.advance(10)
        busNotify(bus)
        var again = h.state.apps[bus]
        again?.lastSeen = made?.lastSeen
        #expect(again == made, "the same record again, seen later")
        #expect(Self.forgotten(h.all) == [bus, "org.example.Socket"])
    }

    /// A socket app of the same name as a D-Bus app connects: the record is a socket app's from
    /// then on, kept while it is connected (it was forgotten while connected, losing its
    /// categories, because the bus had made it: a stranger's find).
    @Test func aSocketAppNamedAsABusAppIsKeptWhileConnected() {
        var h = NotificationHarness(config: NotificationPolicyConfig(authorization: .init(default: .grant), maxApps: 2, timeZone: "UTC"))
        h.send(.busAppSeen(app: "org.shared.S", answer: .authorized))
        h.send(.appConnected(app: "org.shared.S"))
        #expect(h.state.apps["org.shared.S"]?.viaBus == nil)
        h.authorize("org.shared.S")
        h.send(.registerCategories(app: "org.shared.S", [.init(identifier: "cat")]))
        h.authorize("org.example.B")
        h.advance(10)
        h.authorize("org.example.New")
        #expect(Self.forgotten(h.all) == ["org.example.B"])
        #expect(h.state.apps["org.shared.S"]?.categories["cat"] != nil)
    }

    /// The user's answer to a bus app stays: it is not the default's.
    @Test func aBusAppTheUserAnsweredIsKept() {
        var h = NotificationHarness(config: NotificationPolicyConfig(maxApps: 1, timeZone: "UTC"))
        h.send(.busAppSeen(app: "org.example.Chat", answer: nil))  // bus.authorization prompt
        h.send(.setSettings(app: "org.example.Chat", NotificationSettingsChange(authorization: .authorized)))
        #expect(h.state.apps["org.example.Chat"]?.answeredByDefault == nil)
        h.send(.busAppSeen(app: "org.example.Other", answer: nil))
        #expect(h.errorCode == .limitReached)
    }

    /// A lowered limit takes effect as new apps come: the next one makes room for itself under it,
    /// the oldest first.
    @Test func aLoweredLimitForgetsTheOldestWhenTheNextAppComes() {
        var h = Self.threeAppsSeen(maxApps: 10)
        h.config.maxApps = 2
        h.authorize("org.example.D")
        #expect(Self.forgotten(h.last) == ["org.example.A", "org.example.B"])
        #expect(Set(h.state.apps.keys) == ["org.example.C", "org.example.D"])
    }

    /// Records saved before the bound (no `lastSeen`, `answeredByDefault` or `viaBus`) decode,
    /// go first, and one authorized then (whose answer may have been the user's) is kept.
    @Test func recordsSavedBeforeDecodeAndAnAuthorizedOneIsKept() throws {
        let old = #"{"settings":{"authorization":"AUTH","sound":true,"badge":true,"showPreviews":"always","timeSensitive":true,"criticalAlerts":true,"scheduledSummary":false,"marketing":false},"requestedOptions":["alert"],"categories":{},"badge":0,"connected":false,"queuedResponses":[]}"#
        let undetermined = try JSONDecoder().decode(NotificationAppRecord.self, from: Data(old.replacingOccurrences(of: "AUTH", with: "notDetermined").utf8))
        let authorized = try JSONDecoder().decode(NotificationAppRecord.self, from: Data(old.replacingOccurrences(of: "AUTH", with: "authorized").utf8))
        #expect(undetermined.lastSeen == nil && undetermined.answeredByDefault == nil && undetermined.viaBus == nil)
        var h = Self.threeAppsSeen(maxApps: 5)
        h.state.apps["org.example.Old1"] = authorized
        h.state.apps["org.example.Old2"] = undetermined
        h.authorize("org.example.D")
        #expect(Self.forgotten(h.last) == ["org.example.Old2"], "an old undetermined record goes first; the old authorized one stays")
    }
}
