/// Every number and list the notification rules (POLICY.md N1–N17) name, with the rules' defaults.
///
/// Decodes from the daemon's config JSON; every key is optional and a missing key takes its
/// default, so the scenario shape
/// `{"entitledCriticalApps": ["org.example.Alarm"], "focusModes": {"sleep": {"allowedApps": [],
/// "allowTimeSensitive": true}}, "authorization": {"default": "grant"}}` decodes. Encodes with the
/// same keys. Durations are seconds, volumes are linear amplitude factors 0…1.
public struct NotificationPolicyConfig: Codable, Sendable, Equatable {
    /// The user's standing answer to authorization requests (N1).
    public var authorization: NotificationAuthorizationConfig
    /// Apps entitled to critical alerts (N3), by app id and optionally executable path.
    public var entitledCriticalApps: [NotificationCriticalEntitlement]
    /// Focus modes by name (N7), e.g. `doNotDisturb`, `sleep`, `work`.
    public var focusModes: [String: FocusModeConfig]
    /// Local times at which the scheduled summary is delivered (N9); default 08:00 and 18:00.
    public var summaryTimes: [NotificationClockTime]
    /// Burst and cooldown numbers (N11).
    public var bursts: NotificationBurstConfig
    /// Seconds within which a second call from the same sender breaks through focus (N7); default 180.
    public var repeatedCallWindow: Double
    /// Shortest allowed repeating interval trigger in seconds (N8); default 60.
    public var minimumRepeatingInterval: Double
    /// Most notifications one app may have waiting for a trigger (N8); default 64, as iOS keeps
    /// for an app. A new one beyond it is refused with `limitReached` (a replacement, N10, is not new).
    public var maxPendingPerApp: Int
    /// Most notifications all apps together may have waiting for a trigger (N8); default 1000.
    public var maxPendingTotal: Int
    /// Most apps the daemon keeps a record of (their settings, authorization, badge); default
    /// 4096. A new app beyond it takes the place of the least recently seen record that holds no
    /// choice of the user's, nothing waiting and no connection (``NotificationAppRecord/mayBeForgotten``);
    /// when not enough may go, its request is refused with `limitReached`. An app that connects
    /// gets its record in any case (connections are bounded). Any D-Bus client names the app of
    /// its notifications, so without a bound each new name was kept for ever, on disk too.
    public var maxApps: Int
    /// Body shown to watchers when previews are hidden and the category has no placeholder (N13).
    public var placeholderText: String
    /// IANA time zone for wall-clock triggers, schedules and summary times (N8); nil = the system's.
    public var timeZone: String?
    /// Most actions a category may have (N14); default 4.
    public var maxActionsPerCategory: Int
    /// Volume 0…1 of a critical sound whose request names none (N3); default 1.
    public var defaultCriticalVolume: Double
    /// A trigger whose fire time is more than this many seconds behind `now` was missed (the daemon
    /// was down): a one-shot one is delivered once, marked late; a repeating one skips to its next
    /// occurrence (N15). Default 60.
    public var missedTriggerTolerance: Double
    /// How many recent decisions (including rejections) the state keeps for explanation (N16).
    public var decisionLogLimit: Int
    /// N16: decisions of replaced entries (N10) kept with each notification in the center.
    public var decisionHistoryPerNotification: Int

    /// The defaults named by POLICY.md.
    public init(
        authorization: NotificationAuthorizationConfig = .init(),
        entitledCriticalApps: [NotificationCriticalEntitlement] = [],
        focusModes: [String: FocusModeConfig] = ["doNotDisturb": .init(), "sleep": .init(), "work": .init()],
        summaryTimes: [NotificationClockTime] = [.init(hour: 8, minute: 0), .init(hour: 18, minute: 0)],
        bursts: NotificationBurstConfig = .init(),
        repeatedCallWindow: Double = 180,
        minimumRepeatingInterval: Double = 60,
        maxPendingPerApp: Int = 64,
        maxPendingTotal: Int = 1000,
        maxApps: Int = 4096,
        placeholderText: String = "Notification",
        timeZone: String? = nil,
        maxActionsPerCategory: Int = 4,
        defaultCriticalVolume: Double = 1,
        missedTriggerTolerance: Double = 60,
        decisionLogLimit: Int = 200,
        decisionHistoryPerNotification: Int = 20
    ) {
        self.authorization = authorization
        self.entitledCriticalApps = entitledCriticalApps
        self.focusModes = focusModes
        self.summaryTimes = summaryTimes
        self.bursts = bursts
        self.repeatedCallWindow = repeatedCallWindow
        self.minimumRepeatingInterval = minimumRepeatingInterval
        self.maxPendingPerApp = maxPendingPerApp
        self.maxPendingTotal = maxPendingTotal
        self.maxApps = maxApps
        self.placeholderText = placeholderText
        self.timeZone = timeZone
        self.maxActionsPerCategory = maxActionsPerCategory
        self.defaultCriticalVolume = defaultCriticalVolume
        self.missedTriggerTolerance = missedTriggerTolerance
        self.decisionLogLimit = decisionLogLimit
        self.decisionHistoryPerNotification = decisionHistoryPerNotification
    }

    private enum CodingKeys: String, CodingKey {
        case authorization, entitledCriticalApps, focusModes, summaryTimes, bursts, repeatedCallWindow
        case minimumRepeatingInterval, maxPendingPerApp, maxPendingTotal, maxApps, placeholderText, timeZone, maxActionsPerCategory
        case defaultCriticalVolume, missedTriggerTolerance, decisionLogLimit, decisionHistoryPerNotification
    }

    /// Decodes; every missing key takes its default.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = NotificationPolicyConfig()
        authorization = try c.notificationValue(.authorization, d.authorization)
        entitledCriticalApps = try c.notificationValue(.entitledCriticalApps, d.entitledCriticalApps)
        focusModes = try c.notificationValue(.focusModes, d.focusModes)
        summaryTimes = try c.notificationValue(.summaryTimes, d.summaryTimes)
        bursts = try c.notificationValue(.bursts, d.bursts)
        repeatedCallWindow = try c.notificationValue(.repeatedCallWindow, d.repeatedCallWindow)
        minimumRepeatingInterval = try c.notificationValue(.minimumRepeatingInterval, d.minimumRepeatingInterval)
        maxPendingPerApp = try c.notificationValue(.maxPendingPerApp, d.maxPendingPerApp)
        maxPendingTotal = try c.notificationValue(.maxPendingTotal, d.maxPendingTotal)
        maxApps = try c.notificationValue(.maxApps, d.maxApps)
        placeholderText = try c.notificationValue(.placeholderText, d.placeholderText)
        timeZone = try c.decodeIfPresent(String.self, forKey: .timeZone)
        maxActionsPerCategory = try c.notificationValue(.maxActionsPerCategory, d.maxActionsPerCategory)
        defaultCriticalVolume = try c.notificationValue(.defaultCriticalVolume, d.defaultCriticalVolume)
        missedTriggerTolerance = try c.notificationValue(.missedTriggerTolerance, d.missedTriggerTolerance)
        decisionLogLimit = try c.notificationValue(.decisionLogLimit, d.decisionLogLimit)
        decisionHistoryPerNotification = try c.notificationValue(.decisionHistoryPerNotification, d.decisionHistoryPerNotification)
    }

    /// Human-readable problems with values that decode but make no sense (unknown time zone,
    /// volumes outside 0…1, non-positive limits); empty when the config is usable. For the config
    /// loader to report with file and key.
    public var problems: [String] {
        var out: [String] = []
        if timeZone != nil, NotificationWallClock(timeZoneIdentifier: timeZone) == nil {
            out.append("timeZone: unknown time zone \"\(timeZone!)\"")
        }
        if !(0...1).contains(defaultCriticalVolume) { out.append("defaultCriticalVolume: must be 0…1") }
        if bursts.audibleAlertInterval < 0 { out.append("bursts.audibleAlertInterval: must be ≥ 0") }
        if bursts.coalesceAbovePerSecond < 1 { out.append("bursts.coalesceAbovePerSecond: must be ≥ 1") }
        if bursts.maxDeliveredPerApp < 1 { out.append("bursts.maxDeliveredPerApp: must be ≥ 1") }
        if bursts.maxDeliveredTotal < 1 { out.append("bursts.maxDeliveredTotal: must be ≥ 1") }
        for (i, step) in bursts.cooldown.enumerated() where !(0...1).contains(step.volume) || step.within < 0 {
            out.append("bursts.cooldown[\(i)]: within must be ≥ 0 and volume 0…1")
        }
        // N9: with no summary time, what an app in the summary sends would be held for ever.
        if summaryTimes.isEmpty { out.append("summaryTimes: needs at least one time (HH:MM); an app in the scheduled summary would never get its notifications") }
        for (i, time) in summaryTimes.enumerated() where !time.isValid { out.append("summaryTimes[\(i)]: not a time of day") }
        for (name, mode) in focusModes {
            for (i, w) in mode.schedule.enumerated() where !w.start.isValid || !w.end.isValid {
                out.append("focusModes.\(name).schedule[\(i)]: not a time of day")
            }
        }
        // N3: the binding compares the peer's /proc/PID/exe, always absolute: a relative path
        // never matches, and the entitled app's critical alerts would be refused for good.
        for (i, e) in entitledCriticalApps.enumerated() where e.executablePath.map({ !$0.hasPrefix("/") }) == true {
            out.append("entitledCriticalApps[\(i)].executablePath: must be an absolute path (/usr/bin/…), not \"\(e.executablePath!)\"")
        }
        if maxPendingPerApp < 1 { out.append("maxPendingPerApp: must be ≥ 1") }
        if maxPendingTotal < 1 { out.append("maxPendingTotal: must be ≥ 1") }
        if maxApps < 1 { out.append("maxApps: must be ≥ 1") }
        if maxActionsPerCategory < 0 { out.append("maxActionsPerCategory: must be ≥ 0") }
        if repeatedCallWindow < 0 { out.append("repeatedCallWindow: must be ≥ 0") }
        return out
    }
}

/// The user's standing answer to an app's authorization request (N1): JSON `{"default": "grant"}`.
public struct NotificationAuthorizationConfig: Codable, Sendable, Equatable {
    /// Applied to an app whose settings hold no answer yet; default `prompt`.
    public var `default`: NotificationAuthorizationPolicy

    /// Makes the config; the default policy is `prompt`.
    public init(default policy: NotificationAuthorizationPolicy = .prompt) { self.default = policy }

    private enum CodingKeys: String, CodingKey { case `default` }

    /// Decodes; a missing `default` is `prompt`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.default = try c.notificationValue(.default, .prompt)
    }
}

/// How an authorization request is answered when the user has not answered for that app (N1).
public enum NotificationAuthorizationPolicy: String, Codable, Sendable, Equatable {
    /// Authorize with the requested options.
    case grant
    /// Deny: the app's deliveries fail with `notAuthorized`.
    case deny
    /// Leave it undetermined and tell watchers (the CLI answers with a settings change); until
    /// then deliveries fail with `notAuthorized`.
    case prompt
}

/// One app entitled to critical alerts (N3). Decodes from a bare app id string or from
/// `{"app": "org.example.Alarm", "executablePath": "/usr/bin/alarm"}`.
public struct NotificationCriticalEntitlement: Codable, Sendable, Equatable {
    /// The app id (reverse-DNS).
    public var app: String
    /// If set, the peer process's executable path must equal it.
    public var executablePath: String?

    /// Makes an entitlement.
    public init(app: String, executablePath: String? = nil) {
        self.app = app
        self.executablePath = executablePath
    }

    private enum CodingKeys: String, CodingKey { case app, executablePath }

    /// Decodes from a string (app id only) or an object.
    public init(from decoder: any Decoder) throws {
        if let id = try? decoder.singleValueContainer().decode(String.self) {
            self.init(app: id)
            return
        }
        // Neither a string nor an object: said in the config's words (it said "must be an object",
        // though an app id is an entitlement too; a stranger's `["a", 5]`).
        guard let any = try? decoder.container(keyedBy: AnyKey.self) else {
            throw DecodingError.policyValue(at: decoder.codingPath, "must be an app id or an object {app, executablePath}")
        }
        // Unknown keys are refused (a misspelt executablePath would otherwise drop the binding).
        if let unknown = any.allKeys.first(where: { CodingKeys(rawValue: $0.stringValue) == nil }) {
            throw DecodingError.policyValue(at: any.codingPath + [unknown], "unknown key (an entitlement has app and executablePath)")
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(app: try c.decode(String.self, forKey: .app),
                  executablePath: try c.decodeIfPresent(String.self, forKey: .executablePath))
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

/// One focus mode (N7): who may break through, and when it turns on by itself (N8).
public struct FocusModeConfig: Codable, Sendable, Equatable {
    /// App ids whose notifications break through.
    public var allowedApps: [String]
    /// Senders (content `sender`) whose notifications break through.
    public var allowedSenders: [String]
    /// Whether time-sensitive notifications break through (N4); default true.
    public var allowTimeSensitive: Bool
    /// Whether a second call from the same sender within `repeatedCallWindow` breaks through; default true.
    public var allowRepeatedCalls: Bool
    /// Windows in which the mode turns on by schedule; empty = manual only.
    public var schedule: [FocusScheduleWindow]

    /// Makes a mode; defaults allow nobody, allow time-sensitive and repeated calls, no schedule.
    public init(allowedApps: [String] = [], allowedSenders: [String] = [], allowTimeSensitive: Bool = true,
                allowRepeatedCalls: Bool = true, schedule: [FocusScheduleWindow] = []) {
        self.allowedApps = allowedApps
        self.allowedSenders = allowedSenders
        self.allowTimeSensitive = allowTimeSensitive
        self.allowRepeatedCalls = allowRepeatedCalls
        self.schedule = schedule
    }

    private enum CodingKeys: String, CodingKey {
        case allowedApps, allowedSenders, allowTimeSensitive, allowRepeatedCalls, schedule
    }

    /// Decodes; every missing key takes its default.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = FocusModeConfig()
        allowedApps = try c.notificationValue(.allowedApps, d.allowedApps)
        allowedSenders = try c.notificationValue(.allowedSenders, d.allowedSenders)
        allowTimeSensitive = try c.notificationValue(.allowTimeSensitive, d.allowTimeSensitive)
        allowRepeatedCalls = try c.notificationValue(.allowRepeatedCalls, d.allowRepeatedCalls)
        schedule = try c.notificationValue(.schedule, d.schedule)
    }
}

/// Burst and cooldown numbers (N11).
public struct NotificationBurstConfig: Codable, Sendable, Equatable {
    /// At most one audible alert per app per this many seconds; default 1 (Android: 1000 ms).
    public var audibleAlertInterval: Double
    /// Updates (replacements of a delivered identifier) per app per second above this number are
    /// coalesced, the last one kept; default 5.
    public var coalesceAbovePerSecond: Int
    /// At most this many delivered notifications per app; the oldest is dropped; default 50.
    public var maxDeliveredPerApp: Int
    /// At most this many delivered notifications in the whole center, over all apps; the oldest
    /// are dropped first (N11's per-app cap has no bound on the number of apps; N15 keeps the
    /// center, so it must stay bounded); default 1000.
    public var maxDeliveredTotal: Int
    /// Cooldown steps per app and thread: an alert less than `within` seconds after the previous
    /// one plays at `volume`; the first step that applies wins, sorted by `within`. Default
    /// `[{within: 10, volume: 0}, {within: 60, volume: 0.3}]`: quieter than 60 s restores full volume.
    public var cooldown: [NotificationCooldownStep]

    /// Makes the config with POLICY.md's defaults.
    public init(audibleAlertInterval: Double = 1, coalesceAbovePerSecond: Int = 5, maxDeliveredPerApp: Int = 50,
                cooldown: [NotificationCooldownStep] = [.init(within: 10, volume: 0), .init(within: 60, volume: 0.3)],
                maxDeliveredTotal: Int = 1000) {
        self.maxDeliveredTotal = maxDeliveredTotal
        self.audibleAlertInterval = audibleAlertInterval
        self.coalesceAbovePerSecond = coalesceAbovePerSecond
        self.maxDeliveredPerApp = maxDeliveredPerApp
        self.cooldown = cooldown
    }

    private enum CodingKeys: String, CodingKey {
        case audibleAlertInterval, coalesceAbovePerSecond, maxDeliveredPerApp, cooldown, maxDeliveredTotal
    }

    /// Decodes; every missing key takes its default.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = NotificationBurstConfig()
        audibleAlertInterval = try c.notificationValue(.audibleAlertInterval, d.audibleAlertInterval)
        coalesceAbovePerSecond = try c.notificationValue(.coalesceAbovePerSecond, d.coalesceAbovePerSecond)
        maxDeliveredPerApp = try c.notificationValue(.maxDeliveredPerApp, d.maxDeliveredPerApp)
        maxDeliveredTotal = try c.notificationValue(.maxDeliveredTotal, d.maxDeliveredTotal)
        cooldown = try c.notificationValue(.cooldown, d.cooldown)
    }

    /// The cooldown volume factor for an alert `elapsed` seconds after the previous alert of the
    /// same app and thread (nil elapsed = none before): 1 when no step applies.
    func cooldownVolume(elapsed: Double?) -> Double {
        guard let elapsed else { return 1 }
        return cooldown.sorted { $0.within < $1.within }.first { elapsed < $0.within }?.volume ?? 1
    }
}

/// One cooldown step (N11): an alert less than `within` seconds after the previous plays at `volume`.
public struct NotificationCooldownStep: Codable, Sendable, Equatable {
    /// Seconds since the previous alert of the same app and thread.
    public var within: Double
    /// Volume factor 0…1.
    public var volume: Double

    /// Makes a step.
    public init(within: Double, volume: Double) {
        self.within = within
        self.volume = volume
    }
}

extension KeyedDecodingContainer {
    /// The value for `key`, or `fallback` if the key is missing or null.
    func notificationValue<T: Decodable>(_ key: Key, _ fallback: T) throws -> T {
        try decodeIfPresent(T.self, forKey: key) ?? fallback
    }
}
