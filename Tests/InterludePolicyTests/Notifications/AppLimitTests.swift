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

    /// What keeps a record: each row gives the oldest app (A) something, and the new app's record
    /// then takes B's place instead of A's.
    @Test(arguments: [
        "a setting of the user's", "the user's authorization", "a badge", "a notification in the center",
        "one waiting for its trigger", "a connection", "categories", "a remote registration", "a queued action response",
    ])
    func whatTheUserChoseOrWhatWaitsKeepsARecord(_ what: String) {
        var h = Self.threeAppsSeen(maxApps: 4)
        let a = "org.example.A"
        switch what {
        case "a setting of the user's": h.send(.setSettings(app: a, NotificationSettingsChange(sound: false)))
        case "the user's authorization": h.send(.setSettings(app: a, NotificationSettingsChange(authorization: .authorized)))
        case "a badge": h.send(.setBadge(app: a, count: 3))
        case "a notification in the center": h.post("n1", from: a)
        case "one waiting for its trigger": h.post("later", from: a, trigger: .interval(seconds: 3600, repeats: false))
        case "a connection": h.send(.appConnected(app: a))
        case "categories": h.send(.registerCategories(app: a, [.init(identifier: "msg")]))
        case "a remote registration": h.send(.registerRemote(app: a, enabled: true))
        default:
            // Answered while the app is away: the response waits for it (N14).
            h.send(.registerCategories(app: a, [.init(identifier: "msg", actions: [.init(identifier: "ok", title: "OK")])]))
            h.post("n1", from: a, NotificationContent(title: "t", body: "b", categoryIdentifier: "msg"))
            h.send(.respondToAction(app: a, notificationIdentifier: "n1", actionIdentifier: "ok", text: nil))
            #expect(h.state.apps[a]?.queuedResponses.count == 1)
            h.send(.registerCategories(app: a, []))
        }
        #expect(h.errorCode == nil, "\(what): \(String(describing: h.reply))")
        h.authorize("org.example.Filler")  // the fourth record: under the bound, nothing goes
        #expect(Self.forgotten(h.all).isEmpty)
        h.authorize("org.example.D")
        #expect(Self.forgotten(h.last) == ["org.example.B"], "\(what) keeps A's record")
        #expect(h.state.apps[a] != nil)
    }

    /// When no record may go, the new app is refused and nothing is forgotten; an app connecting
    /// gets no record (presence only). The apps known keep working.
    @Test func withNothingToForgetANewAppIsLimitReached() {
        var h = Self.threeAppsSeen()
        for app in Self.apps { h.send(.setSettings(app: app, NotificationSettingsChange(showPreviews: .never))) }
        let before = h.state.apps
        h.authorize("org.example.D")
        #expect(h.errorCode == .limitReached)
        if case let .failed(_, message, _)? = h.reply { #expect(message.contains("maxApps")) }
        h.send(.appConnected(app: "org.example.E"))
        h.send(.registerCategories(app: "org.example.F", [.init(identifier: "msg")]))
        #expect(h.errorCode == .limitReached)
        #expect(h.state.apps == before, "nothing forgotten, nothing added")
        #expect(Self.forgotten(h.all).isEmpty)
        #expect(h.post("n1", from: "org.example.B") != nil && h.errorCode == nil, "a known app still delivers")
    }

    /// A D-Bus app's record (made by `busAppSeen`) may go while "connected", with categories of its
    /// notifications and the badge N12 counted up for them, once they left the center: its next
    /// `Notify` makes the same record again.
    @Test func aBusAppsRecordGoesWhenItHoldsNothingAndComesBackTheSame() {
        var h = NotificationHarness(config: NotificationPolicyConfig(maxApps: 2, timeZone: "UTC"))
        let bus = "org.example.Chat"
        func busNotify(_ app: String) {
            // What the engine sends for a bus notification of a new app (Engine.authorizeBusApp).
            h.send(.busAppSeen(app: app, answer: .authorized))
            if h.state.apps[app]?.requestedOptions == nil { h.send(.requestAuthorization(app: app, options: [.alert, .sound, .badge])) }
            h.send(.appConnected(app: app))
            h.send(.registerCategories(app: app, [.init(identifier: "dbus-1")]))
        }
        busNotify(bus)
        let made = h.state.apps[bus]
        #expect(made?.viaBus == true && made?.answeredByDefault == true && made?.settings.authorization == .authorized)
        h.post("dbus-1", from: bus)
        h.send(.removeDelivered(app: bus, identifiers: ["dbus-1"]))
        #expect(h.state.apps[bus]?.badge == 1 && h.state.delivered.isEmpty, "N12 counted it up; it left the center")
        h.advance(10)
        h.send(.requestAuthorization(app: "org.example.Socket", options: [.alert]))  // undetermined (prompt): may go too
        h.advance(10)
        busNotify("org.example.Other")
        #expect(Self.forgotten(h.all) == [bus], "the bus app was the least recently seen")
        h.advance(10)
        busNotify(bus)
        var again = h.state.apps[bus]
        again?.lastSeen = made?.lastSeen
        #expect(again?.badge == 0)
        #expect(again == made, "the same record again, seen later")
        #expect(Self.forgotten(h.all) == [bus, "org.example.Socket"])
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
