import InterludePolicy

/// Notification method and event names (PROTOCOL.md "Notifications"; rules N1–N17).
public enum NotificationMethod {
    public static let requestAuthorization = "notification.requestAuthorization"
    public static let add = "notification.add"
    public static let pending = "notification.pending"
    public static let delivered = "notification.delivered"
    public static let remove = "notification.remove"
    public static let setBadge = "notification.setBadge"
    public static let registerCategories = "notification.registerCategories"
    public static let respond = "notification.respond"
    public static let explain = "notification.explain"
    public static let getSettings = "notification.getSettings"
    public static let setSettings = "notification.setSettings"
    public static let focusSet = "focus.set"
    public static let focusStatus = "focus.status"
}

/// `notification.requestAuthorization` (N1): the calling app asks for these options.
public struct RequestAuthorizationParams: WireParams, Equatable {
    public static let fields: Set<String> = ["options"]
    /// `alert`, `sound`, `badge`, `criticalAlert`, `provisional`.
    public var options: [NotificationAuthorizationOption]
    public init(options: [NotificationAuthorizationOption]) { self.options = options }
}
public struct AuthorizationResult: Codable, Sendable, Equatable {
    public var status: NotificationAuthorizationStatus
    public var options: [NotificationAuthorizationOption]
    public init(status: NotificationAuthorizationStatus, options: [NotificationAuthorizationOption]) { self.status = status; self.options = options }
}

/// When a notification fires: one of `in` (seconds from now, optionally repeating, N8: ≥ 60 s),
/// `at` (seconds since the Unix epoch, once) or `calendar` (local wall-clock components).
public struct TriggerParams: Codable, Sendable, Equatable {
    public var `in`: Double?
    public var at: Double?
    public var calendar: NotificationCalendarMatch?
    public var repeats: Bool?
    public init(in seconds: Double? = nil, at: Double? = nil, calendar: NotificationCalendarMatch? = nil, repeats: Bool? = nil) {
        self.in = seconds; self.at = at; self.calendar = calendar; self.repeats = repeats
    }
}

/// `notification.add`: deliver now or schedule a notification of the calling app.
public struct AddNotificationParams: WireParams, Equatable {
    public static let nestedFields: [String: Set<String>] = [
        "trigger": ["in", "at", "calendar", "repeats"],
        "trigger.calendar": ["year", "month", "day", "weekday", "hour", "minute", "second"],
    ]
    public static let fields: Set<String> = [
        "identifier", "title", "subtitle", "body", "sound", "criticalVolume", "badge", "thread", "category", "level",
        "relevance", "promotional", "alertOnce", "sender", "isCall", "userInfo", "trigger",
    ]
    /// Unique per app; a request with the identifier of a pending or delivered one replaces it (N10). Default: a new id.
    public var identifier: String?
    public var title: String
    public var subtitle: String?
    public var body: String?
    /// A sound name or path (S2); absent or `"none"` = no sound (as iOS's content.sound = nil).
    public var sound: String?
    /// Critical sound volume 0…1 (N3).
    public var criticalVolume: Double?
    /// Content badge (N12): 0 clears the app's delivered notifications.
    public var badge: Int?
    public var thread: String?
    public var category: String?
    /// `passive`, `active` (default), `timeSensitive`, `critical` (or 0…3).
    public var level: InterruptionLevel?
    /// Relevance score 0…1 for the scheduled summary (N9).
    public var relevance: Double?
    /// Marketing (N6).
    public var promotional: Bool?
    /// Replacement does not alert again (N10).
    public var alertOnce: Bool?
    /// Who it is from (N7 allowed senders, repeated calls).
    public var sender: String?
    /// A call (N7 repeated calls).
    public var isCall: Bool?
    public var userInfo: [String: String]?
    public var trigger: TriggerParams?
    public init(identifier: String? = nil, title: String, subtitle: String? = nil, body: String? = nil, sound: String? = nil,
                criticalVolume: Double? = nil, badge: Int? = nil, thread: String? = nil, category: String? = nil,
                level: InterruptionLevel? = nil, relevance: Double? = nil, promotional: Bool? = nil, alertOnce: Bool? = nil,
                sender: String? = nil, isCall: Bool? = nil, userInfo: [String: String]? = nil, trigger: TriggerParams? = nil) {
        self.identifier = identifier; self.title = title; self.subtitle = subtitle; self.body = body; self.sound = sound
        self.criticalVolume = criticalVolume; self.badge = badge; self.thread = thread; self.category = category
        self.level = level; self.relevance = relevance; self.promotional = promotional; self.alertOnce = alertOnce
        self.sender = sender; self.isCall = isCall; self.userInfo = userInfo; self.trigger = trigger
    }
}
/// The reply to `notification.add`: the identifier and the decision with the rules that made it (N16).
public struct AddNotificationResult: Codable, Sendable, Equatable {
    public var identifier: String
    public var decision: NotificationDecision
    public init(identifier: String, decision: NotificationDecision) { self.identifier = identifier; self.decision = decision }
}

/// `notification.pending` / `notification.delivered`: one page of a listing; `app` (for the
/// user's tools) defaults to the caller. The listing is the center (oldest first) followed by the
/// pending requests; a page holds at most `limit` entries and about `listPageBytes` of JSON
/// (always at least one entry), from `offset` on (issue 7: a whole center of large bodies did not
/// fit in `server.maxOutputBytes`).
public struct ListNotificationsParams: WireParams, Equatable {
    public static let fields: Set<String> = ["app", "all", "offset", "limit"]
    /// Default `limit`.
    public static let defaultLimit = 100
    /// Largest `limit`.
    public static let maximumLimit = 1000
    /// About how many bytes of entries a page holds (256 KiB): well under the default
    /// `server.maxOutputBytes` (1 MiB), so a reader is never cut off for listing its center.
    public static let listPageBytes = 256 * 1024
    public var app: String?
    /// Every app's (the CLI's `center` without `--app`).
    public var all: Bool?
    /// Entries of the listing to skip (the previous reply's `nextOffset`); default 0.
    public var offset: Int?
    /// Most entries in this page, 1…1000; default 100.
    public var limit: Int?
    public init(app: String? = nil, all: Bool? = nil, offset: Int? = nil, limit: Int? = nil) {
        self.app = app; self.all = all; self.offset = offset; self.limit = limit
    }
}
/// The result of `notification.pending` / `notification.delivered`: one page. Views honour hidden
/// previews (N13).
public struct NotificationListResult: Codable, Sendable, Equatable {
    /// This page's part of the center, oldest first.
    public var notifications: [NotificationView]
    /// This page's part of the requests waiting for their trigger (after the whole center).
    public var pending: [PendingSummary]
    /// The badge (N12) of each app listed: the one app asked about (0 if it has none), or with
    /// `all` every app whose badge is not 0.
    public var badges: [String: Int]
    /// Whether more entries follow this page: ask again with `offset: nextOffset`.
    public var more: Bool
    /// The `offset` of the next page; present only when `more` is true.
    public var nextOffset: Int?
    /// How many notifications the whole listing has in the center, and how many pending.
    public var deliveredCount: Int
    public var pendingCount: Int
    public init(notifications: [NotificationView], pending: [PendingSummary], badges: [String: Int] = [:],
                more: Bool = false, nextOffset: Int? = nil, deliveredCount: Int? = nil, pendingCount: Int? = nil) {
        self.notifications = notifications; self.pending = pending; self.badges = badges
        self.more = more; self.nextOffset = nextOffset
        self.deliveredCount = deliveredCount ?? notifications.count; self.pendingCount = pendingCount ?? pending.count
    }
    enum CodingKeys: String, CodingKey { case notifications, pending, badges, more, nextOffset, deliveredCount, pendingCount }
    /// Decodes; `more`, `nextOffset` and the counts may be missing (a daemon before paging: one page).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        notifications = try c.decode([NotificationView].self, forKey: .notifications)
        pending = try c.decode([PendingSummary].self, forKey: .pending)
        badges = try c.decodeIfPresent([String: Int].self, forKey: .badges) ?? [:]
        more = try c.decodeIfPresent(Bool.self, forKey: .more) ?? false
        nextOffset = try c.decodeIfPresent(Int.self, forKey: .nextOffset)
        deliveredCount = try c.decodeIfPresent(Int.self, forKey: .deliveredCount) ?? notifications.count
        pendingCount = try c.decodeIfPresent(Int.self, forKey: .pendingCount) ?? pending.count
    }
}
public struct PendingSummary: Codable, Sendable, Equatable {
    public var app: String
    public var identifier: String
    public var title: String
    /// Seconds since the Unix epoch.
    public var fireAt: Double
    public var repeats: Bool
    public init(app: String, identifier: String, title: String, fireAt: Double, repeats: Bool) {
        self.app = app; self.identifier = identifier; self.title = title; self.fireAt = fireAt; self.repeats = repeats
    }
}

/// `notification.remove`: pending and/or delivered identifiers (nil list = all) of `app` (default the caller).
public struct RemoveNotificationsParams: WireParams, Equatable {
    public static let fields: Set<String> = ["app", "pending", "delivered", "all"]
    public var app: String?
    public var pending: [String]?
    public var delivered: [String]?
    /// Remove every pending and delivered notification of the app.
    public var all: Bool?
    public init(app: String? = nil, pending: [String]? = nil, delivered: [String]? = nil, all: Bool? = nil) {
        self.app = app; self.pending = pending; self.delivered = delivered; self.all = all
    }
}

/// The result of `notification.remove`: the identifiers that were there and are gone (pending,
/// held or delivered), each once, in no particular order. Unknown identifiers are not in it.
public struct RemoveNotificationsResult: Codable, Sendable, Equatable {
    public var removed: [String]
    public init(removed: [String]) { self.removed = removed }
}

/// `notification.setBadge` (N12).
public struct SetBadgeParams: WireParams, Equatable {
    public static let fields: Set<String> = ["app", "count"]
    public var app: String?
    public var count: Int
    public init(app: String? = nil, count: Int) { self.app = app; self.count = count }
}

/// `notification.registerCategories` (N14: at most 4 actions each).
public struct RegisterCategoriesParams: WireParams, Equatable {
    public static let fields: Set<String> = ["categories"]
    public static let nestedFields: [String: Set<String>] = [
        "categories[]": ["identifier", "actions", "hiddenPreviewsBodyPlaceholder"],
        "categories[].actions[]": ["identifier", "title", "options", "textInputPlaceholder"],
    ]
    public var categories: [NotificationCategory]
    public init(categories: [NotificationCategory]) { self.categories = categories }
}

/// `notification.respond`: the user acts on a notification (N14); reaches the app, queued if offline.
public struct RespondParams: WireParams, Equatable {
    public static let fields: Set<String> = ["app", "notification", "action", "text"]
    public var app: String
    public var notification: String
    public var action: String
    public var text: String?
    public init(app: String, notification: String, action: String, text: String? = nil) {
        self.app = app; self.notification = notification; self.action = action; self.text = text
    }
}

/// `notification.explain` (N16).
public struct ExplainParams: WireParams, Equatable {
    public static let fields: Set<String> = ["app", "identifier"]
    public var app: String?
    public var identifier: String
    public init(app: String? = nil, identifier: String) { self.app = app; self.identifier = identifier }
}
public struct ExplainResult: Codable, Sendable, Equatable {
    public var app: String
    public var identifier: String
    /// The latest decision.
    public var decision: NotificationDecision
    /// Every decision known about it, oldest first, the latest included (N16; replaced entries'
    /// decisions too, N10).
    public var history: [NotificationDecisionRecord]?
    /// What the latest decided sound played (S1), when the daemon played one since it started;
    /// nil otherwise (not kept across restarts: the decision is).
    public var sound: PlayedSound?
    public init(app: String, identifier: String, decision: NotificationDecision, history: [NotificationDecisionRecord]? = nil,
                sound: PlayedSound? = nil) {
        self.app = app; self.identifier = identifier; self.decision = decision; self.history = history; self.sound = sound
    }
}

/// What a notification's decided sound actually played (POLICY.md S1): the sound the decision
/// named, what played (that sound, the default sound it fell back to, or `"none"`), and why it was
/// not the requested one (the S1 warning, or the error when nothing played).
public struct PlayedSound: Codable, Sendable, Equatable {
    /// The sound the decision named (a name, a path or `"default"`).
    public var requested: String
    /// What played: the requested sound, the default it fell back to, or `"none"`.
    public var played: String
    /// The S1 warning (the requested sound could not be used) or the error (nothing played).
    public var warning: WireError?
    public init(requested: String, played: String, warning: WireError? = nil) {
        self.requested = requested; self.played = played; self.warning = warning
    }
}

/// `notification.getSettings` / `notification.setSettings` (N2; the user's, from the CLI).
@dynamicMemberLookup
public struct SettingsParams: WireParams, Equatable {
    public static let fields: Set<String> = ["app", "authorization", "sound", "badge", "showPreviews", "timeSensitive",
                                             "criticalAlerts", "scheduledSummary", "marketing", "remote"]
    /// Whose settings (default the caller).
    public var app: String?
    /// The change to apply (nil fields unchanged), on the wire as params beside `app`.
    public var change: NotificationSettingsChange
    public init(app: String? = nil, change: NotificationSettingsChange = NotificationSettingsChange()) { self.app = app; self.change = change }
    /// The change's fields as the params' own: `p.sound = false`.
    public subscript<T>(dynamicMember field: WritableKeyPath<NotificationSettingsChange, T>) -> T {
        get { change[keyPath: field] }
        set { change[keyPath: field] = newValue }
    }
    enum CodingKeys: String, CodingKey { case app }
    public init(from decoder: any Decoder) throws {
        app = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(String.self, forKey: .app)
        change = try NotificationSettingsChange(from: decoder)
    }
    public func encode(to encoder: any Encoder) throws {
        try change.encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(app, forKey: .app)
    }
}

/// `focus.set`: turn a focus mode on (`name`), optionally `until` (epoch seconds) or `for` seconds; `name` null = off.
public struct FocusSetParams: WireParams, Equatable {
    public static let fields: Set<String> = ["name", "until", "for"]
    public var name: String?
    public var until: Double?
    public var `for`: Double?
    public init(name: String?, until: Double? = nil, for seconds: Double? = nil) { self.name = name; self.until = until; self.for = seconds }
}
public struct FocusStatusResult: Codable, Sendable, Equatable {
    /// The active focus, nil when none.
    public var focus: String?
    public var manual: Bool
    /// Seconds since the Unix epoch, when a manual focus ends by itself.
    public var until: Double?
    /// Configured focus modes.
    public var modes: [String]
    public init(focus: String?, manual: Bool, until: Double?, modes: [String]) { self.focus = focus; self.manual = manual; self.until = until; self.modes = modes }
}

/// Event names of the notification side.
public enum NotificationEventName {
    public static let delivered = "notificationDelivered"
    public static let updated = "notificationUpdated"
    public static let removed = "notificationRemoved"
    public static let decided = "notificationDecided"
    public static let actionResponse = "actionResponse"
    public static let focusChanged = "focusChanged"
    public static let summaryDelivered = "summaryDelivered"
    public static let missedDuringFocus = "missedDuringFocus"
    public static let authorizationRequested = "authorizationRequested"
    public static let settingsChanged = "settingsChanged"
    public static let badgeChanged = "badgeChanged"
    /// The daemon forgot an app's record to stay within `maxApps` (to the user's tools).
    public static let appForgotten = "appForgotten"
}
