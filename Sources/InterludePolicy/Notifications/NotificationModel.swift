/// What an app asks for at authorization (N1).
public enum NotificationAuthorizationOption: String, Codable, Sendable, Hashable, CaseIterable {
    /// Banners.
    case alert
    /// Sounds.
    case sound
    /// Badges (N12).
    case badge
    /// Critical alerts; only honoured for entitled apps (N3).
    case criticalAlert
    /// Provisional: granted without asking, delivered quietly (no sound, no banner).
    case provisional
}

/// The user's answer for one app (N1); this is N2's "notifications allowed" setting.
public enum NotificationAuthorizationStatus: String, Codable, Sendable, Hashable {
    /// Not answered yet (default policy `prompt`); deliveries fail with `notAuthorized`.
    case notDetermined
    /// Denied; deliveries fail with `notAuthorized`.
    case denied
    /// Allowed.
    case authorized
    /// Allowed quietly: center only, no sound, no banner.
    case provisional
}

/// When previews (the body) are shown to watchers (N13).
public enum NotificationPreviewSetting: String, Codable, Sendable, Hashable {
    /// Show the body.
    case always
    /// Replace the body with the category's placeholder.
    case never
}

/// Per-app notification settings, owned by the user (N2).
public struct NotificationAppSettings: Codable, Sendable, Equatable {
    /// Whether notifications are allowed (N1 answer). Starts `notDetermined`.
    public var authorization: NotificationAuthorizationStatus
    /// Whether sounds play (also needs the `sound` option at authorization).
    public var sound: Bool
    /// Whether the badge is kept (also needs the `badge` option) (N12).
    public var badge: Bool
    /// Whether watchers see bodies (N13).
    public var showPreviews: NotificationPreviewSetting
    /// Whether time-sensitive notifications keep their level (N4); otherwise they count as active.
    public var timeSensitive: Bool
    /// Whether critical alerts are allowed, given the entitlement (N3).
    public var criticalAlerts: Bool
    /// Whether passive and active notifications wait for the scheduled summary (N9).
    public var scheduledSummary: Bool
    /// The separate opt-in for promotional notifications (N6).
    public var marketing: Bool
    /// Whether remote notifications (from a provider through the broker, issue 11) reach the app
    /// (N2); nil = never set, which is off: the user opts each app in.
    public var remote: Bool?

    /// Settings of an app nobody configured: undetermined, sound/badge/previews/time-sensitive/
    /// critical on, no summary, no marketing.
    public init(authorization: NotificationAuthorizationStatus = .notDetermined, sound: Bool = true, badge: Bool = true,
                showPreviews: NotificationPreviewSetting = .always, timeSensitive: Bool = true,
                criticalAlerts: Bool = true, scheduledSummary: Bool = false, marketing: Bool = false) {
        self.authorization = authorization
        self.sound = sound
        self.badge = badge
        self.showPreviews = showPreviews
        self.timeSensitive = timeSensitive
        self.criticalAlerts = criticalAlerts
        self.scheduledSummary = scheduledSummary
        self.marketing = marketing
    }
}

/// A partial change to `NotificationAppSettings` (N2): nil fields stay as they are.
public struct NotificationSettingsChange: Codable, Sendable, Equatable {
    /// New authorization status (the user's answer, e.g. from the CLI).
    public var authorization: NotificationAuthorizationStatus?
    /// New sound setting.
    public var sound: Bool?
    /// New badge setting.
    public var badge: Bool?
    /// New preview setting.
    public var showPreviews: NotificationPreviewSetting?
    /// New time-sensitive setting.
    public var timeSensitive: Bool?
    /// New critical-alerts setting.
    public var criticalAlerts: Bool?
    /// New scheduled-summary setting.
    public var scheduledSummary: Bool?
    /// New marketing opt-in.
    public var marketing: Bool?
    /// New remote-notifications setting (issue 11).
    public var remote: Bool?

    /// Makes a change; every field defaults to "unchanged".
    public init(authorization: NotificationAuthorizationStatus? = nil, sound: Bool? = nil, badge: Bool? = nil,
                showPreviews: NotificationPreviewSetting? = nil, timeSensitive: Bool? = nil,
                criticalAlerts: Bool? = nil, scheduledSummary: Bool? = nil, marketing: Bool? = nil, remote: Bool? = nil) {
        self.remote = remote
        self.authorization = authorization
        self.sound = sound
        self.badge = badge
        self.showPreviews = showPreviews
        self.timeSensitive = timeSensitive
        self.criticalAlerts = criticalAlerts
        self.scheduledSummary = scheduledSummary
        self.marketing = marketing
    }

    /// `settings` with this change applied.
    public func applied(to settings: NotificationAppSettings) -> NotificationAppSettings {
        var s = settings
        if let authorization { s.authorization = authorization }
        if let sound { s.sound = sound }
        if let badge { s.badge = badge }
        if let showPreviews { s.showPreviews = showPreviews }
        if let timeSensitive { s.timeSensitive = timeSensitive }
        if let criticalAlerts { s.criticalAlerts = criticalAlerts }
        if let scheduledSummary { s.scheduledSummary = scheduledSummary }
        if let marketing { s.marketing = marketing }
        if let remote { s.remote = remote }
        return s
    }
}

/// What a notification says and how it asks for attention.
public struct NotificationContent: Codable, Sendable, Equatable {
    /// Title line.
    public var title: String
    /// Subtitle line.
    public var subtitle: String
    /// Body text; hidden from watchers when previews are `never` (N13).
    public var body: String
    /// Sound name (S2 lookup, `"default"` for the default sound); nil = silent.
    public var sound: String?
    /// Volume 0…1 of a critical sound (N3); nil = `defaultCriticalVolume`. Ignored below critical.
    public var criticalVolume: Double?
    /// New badge number for the app (N12); 0 clears the app's delivered notifications.
    public var badge: Int?
    /// Thread (conversation) id; cooldown is per app and thread (N11).
    public var threadIdentifier: String?
    /// Category id: actions (N14) and hidden-preview placeholder (N13).
    public var categoryIdentifier: String?
    /// Interruption level; default `active`.
    public var interruptionLevel: InterruptionLevel
    /// Relevance 0…1 ordering the scheduled summary (N9); default 0.
    public var relevanceScore: Double
    /// Marketing content (N6).
    public var promotional: Bool
    /// A replacement (N10) with this set does not alert again.
    public var alertOnce: Bool
    /// Who it is from (a person, a phone number): focus allow-list and repeated calls (N7).
    public var sender: String?
    /// Whether this is an incoming call (N7 repeated calls).
    public var isCall: Bool
    /// Opaque app data, passed through.
    public var userInfo: [String: String]
    /// What a `critical` request becomes when the app is not entitled (N3): nil = `active`; a bus
    /// notification's critical urgency asks for `timeSensitive` (N4 still applies).
    public var criticalFallbackLevel: InterruptionLevel?

    /// Makes content; defaults: empty texts, no sound, `active`, relevance 0, not promotional.
    public init(title: String = "", subtitle: String = "", body: String = "", sound: String? = nil,
                criticalVolume: Double? = nil, badge: Int? = nil, threadIdentifier: String? = nil,
                categoryIdentifier: String? = nil, interruptionLevel: InterruptionLevel = .active,
                relevanceScore: Double = 0, promotional: Bool = false, alertOnce: Bool = false,
                sender: String? = nil, isCall: Bool = false, userInfo: [String: String] = [:]) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.sound = sound
        self.criticalVolume = criticalVolume
        self.badge = badge
        self.threadIdentifier = threadIdentifier
        self.categoryIdentifier = categoryIdentifier
        self.interruptionLevel = interruptionLevel
        self.relevanceScore = relevanceScore
        self.promotional = promotional
        self.alertOnce = alertOnce
        self.sender = sender
        self.isCall = isCall
        self.userInfo = userInfo
    }

    private enum CodingKeys: String, CodingKey {
        case title, subtitle, body, sound, criticalVolume, badge, threadIdentifier, categoryIdentifier
        case interruptionLevel, relevanceScore, promotional, alertOnce, sender, isCall, userInfo, criticalFallbackLevel
    }

    /// Decodes; every missing key takes its default.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = NotificationContent()
        title = try c.notificationValue(.title, d.title)
        subtitle = try c.notificationValue(.subtitle, d.subtitle)
        body = try c.notificationValue(.body, d.body)
        sound = try c.decodeIfPresent(String.self, forKey: .sound)
        criticalVolume = try c.decodeIfPresent(Double.self, forKey: .criticalVolume)
        badge = try c.decodeIfPresent(Int.self, forKey: .badge)
        threadIdentifier = try c.decodeIfPresent(String.self, forKey: .threadIdentifier)
        categoryIdentifier = try c.decodeIfPresent(String.self, forKey: .categoryIdentifier)
        interruptionLevel = try c.notificationValue(.interruptionLevel, d.interruptionLevel)
        relevanceScore = try c.notificationValue(.relevanceScore, d.relevanceScore)
        promotional = try c.notificationValue(.promotional, d.promotional)
        alertOnce = try c.notificationValue(.alertOnce, d.alertOnce)
        sender = try c.decodeIfPresent(String.self, forKey: .sender)
        isCall = try c.notificationValue(.isCall, d.isCall)
        userInfo = try c.notificationValue(.userInfo, d.userInfo)
        criticalFallbackLevel = try c.decodeIfPresent(InterruptionLevel.self, forKey: .criticalFallbackLevel)
    }

    /// Whether there is nothing to show (a badge- or sound-only request): it updates the badge
    /// but takes no place in the center.
    var isEmpty: Bool { title.isEmpty && subtitle.isEmpty && body.isEmpty }
}

/// When a request fires (N8). Nil trigger on a request = now.
public enum NotificationTrigger: Codable, Sendable, Equatable {
    /// `seconds` after it was added, and every `seconds` after that if `repeats` (absolute time,
    /// unaffected by daylight saving; repeating needs ≥ `minimumRepeatingInterval`).
    case interval(seconds: Double, repeats: Bool)
    /// At the next local wall-clock time matching the components, and each match after that if `repeats`.
    case calendar(NotificationCalendarMatch, repeats: Bool)

    /// Whether the trigger repeats.
    public var repeats: Bool {
        switch self {
        case .interval(_, let r), .calendar(_, let r): r
        }
    }
}

/// A notification request from an app: identifier (unique per app; a second request with the
/// same identifier replaces the first, N10), content and optional trigger (nil = deliver now).
public struct NotificationRequest: Codable, Sendable, Equatable {
    /// Identifier, unique within the app.
    public var identifier: String
    /// What it says.
    public var content: NotificationContent
    /// When it fires; nil = now.
    public var trigger: NotificationTrigger?

    /// Makes a request.
    public init(identifier: String, content: NotificationContent, trigger: NotificationTrigger? = nil) {
        self.identifier = identifier
        self.content = content
        self.trigger = trigger
    }
}

/// Options of an action (N14).
public enum NotificationActionOption: String, Codable, Sendable, Hashable {
    /// Shown as destructive.
    case destructive
    /// Needs the user to authenticate first.
    case authenticationRequired
    /// Brings the app to the foreground.
    case foreground
}

/// An action button of a category (N14).
public struct NotificationAction: Codable, Sendable, Equatable {
    /// Identifier reported back in the response.
    public var identifier: String
    /// Button title.
    public var title: String
    /// Options.
    public var options: [NotificationActionOption]
    /// If set, the action takes text input with this placeholder.
    public var textInputPlaceholder: String?

    /// Makes an action.
    public init(identifier: String, title: String, options: [NotificationActionOption] = [],
                textInputPlaceholder: String? = nil) {
        self.identifier = identifier
        self.title = title
        self.options = options
        self.textInputPlaceholder = textInputPlaceholder
    }
}

/// A notification category: its actions (≤ `maxActionsPerCategory`, N14) and hidden-preview
/// placeholder (N13).
public struct NotificationCategory: Codable, Sendable, Equatable {
    /// Identifier that content refers to with `categoryIdentifier`.
    public var identifier: String
    /// Actions, at most 4 by default.
    public var actions: [NotificationAction]
    /// Body shown when previews are hidden; nil = config `placeholderText`.
    public var hiddenPreviewsBodyPlaceholder: String?

    /// Makes a category.
    public init(identifier: String, actions: [NotificationAction] = [], hiddenPreviewsBodyPlaceholder: String? = nil) {
        self.identifier = identifier
        self.actions = actions
        self.hiddenPreviewsBodyPlaceholder = hiddenPreviewsBodyPlaceholder
    }
}

/// The user's response to a delivered notification (N14), sent to the app.
public struct NotificationActionResponse: Codable, Sendable, Equatable {
    /// Identifier of the tapped action, or `"default"` (opened) / `"dismiss"`.
    public var actionIdentifier: String
    /// The notification it answers.
    public var notificationIdentifier: String
    /// Text typed into a text-input action.
    public var text: String?
    /// When the user responded.
    public var time: NotificationTime

    /// Makes a response.
    public init(actionIdentifier: String, notificationIdentifier: String, text: String? = nil, time: NotificationTime) {
        self.actionIdentifier = actionIdentifier
        self.notificationIdentifier = notificationIdentifier
        self.text = text
        self.time = time
    }

    /// The action identifier for "the user opened the notification".
    public static let defaultAction = "default"
    /// The action identifier for "the user dismissed the notification".
    public static let dismissAction = "dismiss"
}

/// A standalone sound request from an app (N17): it obeys the same focus, ringer and rate rules
/// as a notification's sound.
public struct NotificationPlayRequest: Codable, Sendable, Equatable {
    /// Sound name (S2).
    public var sound: String
    /// Requested volume 0…1; default 1. For critical, the critical volume.
    public var volume: Double
    /// Level it asks for; default `active`. `critical` needs the entitlement (N3).
    public var interruptionLevel: InterruptionLevel
    /// Thread for the N11 cooldown.
    public var threadIdentifier: String?
    /// Sender, for the focus allow-list (N7).
    public var sender: String?

    /// Makes a play request.
    public init(sound: String, volume: Double = 1, interruptionLevel: InterruptionLevel = .active,
                threadIdentifier: String? = nil, sender: String? = nil) {
        self.sound = sound
        self.volume = volume
        self.interruptionLevel = interruptionLevel
        self.threadIdentifier = threadIdentifier
        self.sender = sender
    }
}
