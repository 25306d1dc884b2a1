import Foundation
import InterludePolicy
@testable import InterludeStore

/// A fresh temporary folder for one test (never the user's state folder); removed by `remove()`.
struct TemporaryFolder {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.path + "/interlude-store-test-" + UUID().uuidString
    }

    /// The store's folder inside it (not created: the store creates it).
    var storeDirectory: String { path + "/state/interlude" }
    /// The database file the store uses.
    var databasePath: String { storeDirectory + "/" + NotificationStore.fileName }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Drives `NotificationPolicy.reduce` with a manual clock, as the engine would (no sleeps).
struct PolicyDriver {
    var state = NotificationState()
    let config: NotificationPolicyConfig
    var now: NotificationTime

    init(config: NotificationPolicyConfig = .init(authorization: .init(default: .grant), timeZone: "UTC"),
         start: NotificationTime = NotificationTime(1_750_000_000)) {
        self.config = config
        now = start
        send(.tick)
    }

    /// Sends an event `after` seconds past the current time.
    @discardableResult
    mutating func send(_ event: NotificationEvent, after seconds: Double = 0) -> [NotificationEffect] {
        now = now + seconds
        return NotificationPolicy.reduce(&state, event, now: now, config: config)
    }

    /// Adds a request from `app`.
    mutating func post(_ id: String, from app: String, _ content: NotificationContent,
                       trigger: NotificationTrigger? = nil, after seconds: Double = 0) {
        send(.add(NotificationRequest(identifier: id, content: content, trigger: trigger), app: app,
                  peerExecutablePath: "/usr/bin/\(app)"), after: seconds)
    }
}

enum Apps {
    static let chat = "org.example.Chat"
    static let news = "org.example.News"
    static let alarm = "org.example.Alarm"
}

/// A state with every part filled, built through the policy: three apps with settings and
/// categories, a one-shot time trigger and a repeating calendar trigger pending, delivered
/// notifications with badges, a notification held for the summary, coalesced updates, a queued
/// action response, focus on with a silenced notification, ringer silent and a call.
func richPolicyState() -> PolicyDriver {
    var d = PolicyDriver(config: .init(authorization: .init(default: .grant), entitledCriticalApps: [.init(app: Apps.alarm)],
                                       timeZone: "Europe/Berlin"))
    d.send(.requestAuthorization(app: Apps.chat, options: [.alert, .sound, .badge]))
    d.send(.requestAuthorization(app: Apps.news, options: [.alert, .badge]))
    d.send(.requestAuthorization(app: Apps.alarm, options: [.alert, .sound, .criticalAlert]))
    d.send(.setSettings(app: Apps.news, .init(showPreviews: .never, scheduledSummary: true)))
    d.send(.registerCategories(app: Apps.chat, [
        NotificationCategory(identifier: "message", actions: [
            .init(identifier: "reply", title: "Reply", textInputPlaceholder: "Message"),
            .init(identifier: "delete", title: "Delete", options: [.destructive]),
        ], hiddenPreviewsBodyPlaceholder: "New message"),
    ]))
    d.post("m1", from: Apps.chat, .init(title: "Alice", subtitle: "Lunch", body: "Noodles at 12:30? \u{1F35C} \"quoted\" / slash",
                                        sound: "message-new-instant", badge: 1, threadIdentifier: "alice",
                                        categoryIdentifier: "message", relevanceScore: 0.25, sender: "alice",
                                        userInfo: ["conversation": "42"]), after: 5)
    d.post("m2", from: Apps.chat, .init(title: "Bob", body: "Running late", sound: "default", badge: 2, threadIdentifier: "bob"),
           after: 12.5)
    d.post("headline", from: Apps.news, .init(title: "Headline", body: "Something happened", relevanceScore: 0.9), after: 3)
    d.post("wake", from: Apps.alarm, .init(title: "Wake up", sound: "alarm-clock-elapsed", criticalVolume: 0.7,
                                           interruptionLevel: .critical),
           trigger: .interval(seconds: 3600, repeats: false), after: 1)
    d.post("standup", from: Apps.chat, .init(title: "Stand-up", body: "in 5 minutes"),
           trigger: .calendar(NotificationCalendarMatch(weekday: .monday, hour: 9, minute: 25), repeats: true))
    d.send(.appConnected(app: Apps.chat), after: 1)
    d.send(.appDisconnected(app: Apps.chat), after: 1)
    d.send(.respondToAction(app: Apps.chat, notificationIdentifier: "m1", actionIdentifier: "reply", text: "on my way"),
           after: 2)
    d.send(.setBadge(app: Apps.chat, count: 7))
    d.send(.setFocus(name: "work", until: nil), after: 1)
    d.post("m3", from: Apps.chat, .init(title: "Carol", body: "Are you there?", sound: "default", sender: "carol"), after: 2)
    d.send(.setRinger(silent: true))
    d.send(.setCallActive(true))
    // N11 coalescing: more than 5 updates of one delivered notification within a second.
    for i in 0..<8 {
        d.post("score", from: Apps.chat, .init(title: "Score", body: "\(i):0", alertOnce: true), after: 0.01)
    }
    // Remote receipts not yet acknowledged by the broker (REMOTE.md "Receipts are owed until the broker has them").
    d.send(.remoteReceiptsOwed([
        OwedReceipt(app: Apps.chat, messageID: "r-1", time: 1_750_000_100.5, payload: #"{"id":"r-1","status":"delivered"}"#),
        OwedReceipt(app: Apps.chat, messageID: "r-2", time: 1_750_000_100.5, payload: #"{"id":"r-2","status":"duplicate","note":"\u00e9 \"q\""}"#),
    ]))
    return d
}

/// The states a crash-test writer saves, in order: state `k` (k ≥ 0) has `k` notifications posted
/// to one app, each setting the badge to its number; the center keeps the last 50 (N11) and the
/// decision log the last 200, so later saves delete rows as well as insert them.
struct CrashScript {
    static let app = "org.example.Crash"
    private(set) var driver: PolicyDriver
    private(set) var k = 0

    init() {
        driver = PolicyDriver()
        driver.send(.requestAuthorization(app: Self.app, options: [.alert, .sound, .badge]))
    }

    var state: NotificationState { driver.state }

    /// Moves to state `k + 1`.
    mutating func step() {
        k += 1
        driver.post("n\(k)", from: Self.app, .init(title: "n\(k)", body: String(repeating: "x", count: k % 300),
                                                 sound: "default", badge: k), after: 10)
        if k % 10 == 0 { driver.send(.removeDelivered(app: Self.app, identifiers: ["n\(k - 3)"])) }
    }

    /// States 0 … `count - 1`.
    static func states(_ count: Int) -> [NotificationState] {
        var script = CrashScript()
        var out = [script.state]
        while out.count < count {
            script.step()
            out.append(script.state)
        }
        return out
    }
}
