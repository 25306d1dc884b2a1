import Foundation
import InterludePolicy

/// Drives `NotificationPolicy.reduce` with a manual clock (no sleeps) and reads its effects.
struct NotificationHarness {
    var state = NotificationState()
    var config: NotificationPolicyConfig
    var now: NotificationTime
    /// Effects of the last `send`.
    var last: [NotificationEffect] = []
    /// Every effect since the harness began.
    var all: [NotificationEffect] = []

    init(config: NotificationPolicyConfig = NotificationPolicyConfig(timeZone: "UTC"),
         start: NotificationTime = NotificationTime(1_750_000_000)) {
        self.config = config
        self.now = start
        send(.tick)
    }

    /// Sends an event at the current time (after moving the clock to `at` if given).
    @discardableResult
    mutating func send(_ event: NotificationEvent, at time: NotificationTime? = nil) -> [NotificationEffect] {
        if let time { now = time }
        last = NotificationPolicy.reduce(&state, event, now: now, config: config)
        all += last
        return last
    }

    /// Moves the clock forward by `seconds` and ticks.
    @discardableResult
    mutating func advance(_ seconds: Double) -> [NotificationEffect] {
        send(.tick, at: now + seconds)
    }

    /// Moves the clock to `time` and ticks.
    @discardableResult
    mutating func tick(at time: NotificationTime) -> [NotificationEffect] { send(.tick, at: time) }

    /// Requests authorization (answered by the config's default policy, or `grant` for the test).
    mutating func authorize(_ app: String, _ options: [NotificationAuthorizationOption] = [.alert, .sound, .badge]) {
        if config.authorization.default != .grant, state.apps[app]?.settings.authorization != .authorized {
            send(.setSettings(app: app, NotificationSettingsChange(authorization: .authorized)))
        }
        send(.requestAuthorization(app: app, options: options))
    }

    /// Adds a request and returns the decision from the reply (accepted or failed).
    @discardableResult
    mutating func post(_ id: String, from app: String, _ content: NotificationContent = NotificationContent(title: "t", body: "b", sound: "default"),
                       trigger: NotificationTrigger? = nil, path: String? = nil) -> NotificationDecision? {
        send(.add(NotificationRequest(identifier: id, content: content, trigger: trigger), app: app, peerExecutablePath: path))
        return replyDecision
    }

    /// The reply of the last send.
    var reply: NotificationReply? {
        for e in last { if case .reply(let r) = e { return r } }
        return nil
    }

    /// The decision in the last reply, if any.
    var replyDecision: NotificationDecision? {
        switch reply {
        case .accepted(_, let d)?: d
        case .played(let d, _)?: d
        case .failed(_, _, let d)?: d
        default: nil
        }
    }

    /// The error code of the last reply, if it failed.
    var errorCode: NotificationErrorCode? {
        if case .failed(let code, _, _)? = reply { return code }
        return nil
    }

    /// Sounds played by the last send (or by `effects`): `playSound` effects, and a standalone
    /// sound's playback in its `played` reply (N17).
    func sounds(in effects: [NotificationEffect]? = nil) -> [NotificationSoundPlayback] {
        (effects ?? last).compactMap {
            switch $0 {
            case .playSound(let p): p
            case .reply(.played(_, let p?)): p
            default: nil
            }
        }
    }

    /// Watcher events of the last send (or of `effects`).
    func events(in effects: [NotificationEffect]? = nil) -> [NotificationWatcherEvent] {
        (effects ?? last).compactMap { if case .emit(let e) = $0 { e } else { nil } }
    }

    /// Notifications that entered the center in the last send (or in `effects`).
    func deliveries(in effects: [NotificationEffect]? = nil) -> [DeliveredNotification] {
        (effects ?? last).compactMap { if case .deliver(let d) = $0 { d } else { nil } }
    }

    /// Identifiers in the center for an app, oldest first.
    func center(_ app: String) -> [String] {
        state.delivered.filter { $0.app == app }.map(\.request.identifier)
    }

    /// The decision of a delivered notification.
    func decision(_ id: String, of app: String) -> NotificationDecision? {
        NotificationPolicy.explain(app: app, identifier: id, in: state)
    }

    /// An instant from an ISO 8601 UTC string, computed by Foundation (independent of the policy's wall clock).
    static func utc(_ text: String) -> NotificationTime {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        return NotificationTime(f.date(from: text)!.timeIntervalSince1970)
    }
}

extension NotificationContent {
    /// Content for tests: title, body, default sound, the given level and extras.
    static func test(_ level: InterruptionLevel = .active, sound: String? = "default", thread: String? = nil,
                     sender: String? = nil, isCall: Bool = false, badge: Int? = nil, relevance: Double = 0,
                     criticalVolume: Double? = nil, promotional: Bool = false, alertOnce: Bool = false,
                     category: String? = nil, body: String = "secret body", title: String = "title") -> NotificationContent {
        NotificationContent(title: title, body: body, sound: sound, criticalVolume: criticalVolume, badge: badge,
                            threadIdentifier: thread, categoryIdentifier: category, interruptionLevel: level,
                            relevanceScore: relevance, promotional: promotional, alertOnce: alertOnce, sender: sender,
                            isCall: isCall)
    }
}
