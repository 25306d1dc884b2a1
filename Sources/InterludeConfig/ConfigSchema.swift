/// Every config key, with its type, default, range and meaning. The single source of truth:
/// validation, defaults and the README's config table come from here, and a test checks that
/// `Config/interlude.json5` spells out exactly these defaults.
///
/// Paths are dot-separated; `*` stands for any key of a map (e.g. a focus mode's name) and `[]`
/// for the elements of an array of objects.
public struct ConfigKey: Sendable {
    public enum Kind: Sendable {
        case number(default: Double, range: ClosedRange<Double>, unit: String)
        case integer(default: Int, range: ClosedRange<Int>, unit: String)
        case bool(default: Bool)
        case string(default: String?, allowed: [String]?)
        case strings(default: [String])
        /// An object whose members are described by other keys (a fixed section, or a `*` map).
        case object
        /// An array of objects whose members are described by `path[].member` keys.
        case objects
        /// Any JSON, checked by the part that reads it (its default as JSON text).
        case json(default: String)
    }
    public var path: String
    public var kind: Kind
    public var doc: String
    /// Read once, when the daemon starts (the socket server's limits, the bus service's settings,
    /// the broker connection): a reload leaves it at its starting value (``ConfigSchema/restartOnly``).
    public var readAtStartOnly = false
    public init(_ path: String, _ kind: Kind, _ doc: String) { self.path = path; self.kind = kind; self.doc = doc }

    /// This key, marked ``readAtStartOnly``.
    func atStartOnly() -> ConfigKey {
        var k = self
        k.readAtStartOnly = true
        return k
    }
}

public enum ConfigSchema {
    /// All keys. Sections come first so that a walker meets them before their members.
    public static let keys: [ConfigKey] = audio + sounds + server + bus + notifications + remote

    /// Desktop notifications over D-Bus (org.freedesktop.Notifications; README "D-Bus notifications").
    static let bus: [ConfigKey] = [
        .init("bus", .object, "Desktop notifications over the session bus (org.freedesktop.Notifications)."),
        .init("bus.authorization", .string(default: "grant", allowed: ["grant", "deny", "prompt"]),
              "N1: bus clients never ask; the answer for an app first seen on the bus (the user's answer, once given, stays)."),
        .init("bus.defaultSound", .string(default: "message-new-instant", allowed: nil),
              "S2: what plays when a bus notification names no sound (sound-name, sound-file); \"none\" = silent.").atStartOnly(),
        .init("bus.inhibitFocus", .string(default: "doNotDisturb", allowed: nil),
              "N7: the focus a bus client's Inhibit (KDE's do-not-disturb) turns on while one inhibition is held."),
        .init("bus.maxNotificationBytes", .integer(default: 65536, range: 1024...(16 * 1024 * 1024), unit: "bytes"),
              "Most text (summary, body, actions, string hints) one Notify may carry; more gets LimitsExceeded.").atStartOnly(),
    ]

    static let audio: [ConfigKey] = [
        .init("audio", .object, "Audio-session arbitration (POLICY.md part A)."),
        .init("audio.duckLevelDb", .number(default: -14, range: -60...0, unit: "dB"),
              "A2: level of ducked streams relative to their user volume (−14 dB = 0.2 amplitude)."),
        .init("audio.duckRampDownMs", .integer(default: 300, range: 0...5000, unit: "ms"), "A2: ramp time when a duck begins."),
        .init("audio.duckRampUpMs", .integer(default: 500, range: 0...5000, unit: "ms"), "A2: ramp time when a duck ends."),
        .init("audio.rampStepMs", .integer(default: 15, range: 5...50, unit: "ms"), "A2: time between two volume writes of a ramp."),
        .init("audio.maxRampStepDb", .number(default: 1.5, range: 0.1...6, unit: "dB"), "A2: largest volume change of one ramp step."),
        .init("audio.enforcementGraceMs", .integer(default: 500, range: 0...10000, unit: "ms"),
              "A8: how long an interrupted session may keep playing before the daemon mutes it."),
        .init("audio.spokenAudioPlayers", .strings(default: ["gpodder", "kasts", "org.kde.kasts", "org.gnome.Podcasts", "podcasts",
                                                              "cozy", "com.github.geigi.cozy", "vocal", "com.github.needleandthread.vocal"]),
              "A3, A10: MPRIS players that are podcast or audiobook apps: their session is spokenAudio (a navigation prompt pauses them). Matched, case-insensitively, against the bus name after org.mpris.MediaPlayer2., the DesktopEntry and the Identity."),
        .init("audio.transientExpirySeconds", .number(default: 10, range: 1...3600, unit: "s"),
              "A9: a ducking or interrupting session with no running stream this long expires."),
    ]

    static let sounds: [ConfigKey] = [
        .init("sounds", .object, "Notification sounds (POLICY.md part S)."),
        .init("sounds.default", .string(default: "default", allowed: nil), "S1: the sound played when a requested one cannot be used."),
        .init("sounds.maxDurationSeconds", .number(default: 30, range: 0.1...600, unit: "s"), "S1: longer sounds are refused."),
        .init("sounds.maxSampleBytes", .integer(default: 16 * 1024 * 1024, range: 1024...(256 * 1024 * 1024), unit: "bytes"),
              "S3: largest decoded sample kept in the sample cache."),
        .init("sounds.theme", .string(default: "freedesktop", allowed: nil), "S2: the freedesktop sound theme to look names up in."),
        .init("sounds.userFolder", .string(default: nil, allowed: nil),
              "S2: the user's sound folder (default $XDG_DATA_HOME/interlude/sounds)."),
        .init("sounds.appFolders", .strings(default: []), "S2: folders searched first (apps' own sounds)."),
    ]

    static let server: [ConfigKey] = [
        .init("server", .object, "The socket server."),
        .init("server.maxClients", .integer(default: 256, range: 1...65536, unit: "connections"),
              "Connections beyond this are refused with rateLimited.").atStartOnly(),
        .init("server.maxClientsPerProcess", .integer(default: 128, range: 1...65536, unit: "connections"),
              "Connections one peer process may hold; beyond it that process is refused with rateLimited (one that leaks connections cannot take them all).").atStartOnly(),
        .init("server.maxOutputBytes", .integer(default: 1024 * 1024, range: 65536...(64 * 1024 * 1024), unit: "bytes"),
              "A client that does not read and lets this much pile up is disconnected.").atStartOnly(),
        .init("server.maxSessionsPerClient", .integer(default: 1024, range: 1...1_000_000, unit: "sessions"),
              "Audio sessions one connection may hold; session.register beyond it is refused (limitReached)."),
        .init("server.maxSessions", .integer(default: 8192, range: 1...1_000_000, unit: "sessions"),
              "Audio sessions all connections together may hold; session.register beyond it is refused (limitReached)."),
        .init("server.logNotificationsPerSecond", .integer(default: 20, range: 0...1_000_000, unit: "lines a second"),
              "N16: the log's lines per notification decided (delivered, held, refused, removed over N11, a remote message's receipt, its sound's S1 warning or failure) are written up to this many a second after a burst of ten times as many; past that, during a flood, they are counted and summed up every 10 s until 10 s come within this rate (the latest decisions stay in the decision log, interlude explain). 0: every line."),
        .init("server.userTools", .strings(default: ["org.interlude.CLI"]),
              "Apps that act for the user (the interlude CLI): they change settings and focus (N2, N7), act on any app's notifications and play sounds without the notification rules (N17)."),
    ]

    /// The notification delivery core's keys (POLICY.md part N). They are top-level, as in
    /// scenario files' `config`; the whole set is then decoded as `NotificationPolicyConfig`.
    static let notifications: [ConfigKey] = [
        .init("authorization", .object, "N1: the standing answer to apps' authorization requests."),
        .init("authorization.default", .string(default: "prompt", allowed: ["grant", "deny", "prompt"]),
              "N1: grant, deny, or prompt (undetermined until the user answers with `interlude auth`)."),
        .init("entitledCriticalApps", .json(default: "[]"),
              "N3: apps entitled to critical alerts: app ids, or {app, executablePath} to bind to the peer's executable."),
        .init("focusModes", .object, "N7: focus modes by name."),
        .init("focusModes.*", .object, "N7: one focus mode."),
        .init("focusModes.*.allowedApps", .strings(default: []), "N7: apps that break through."),
        .init("focusModes.*.allowedSenders", .strings(default: []), "N7: senders that break through."),
        .init("focusModes.*.allowTimeSensitive", .bool(default: true), "N4/N7: time-sensitive notifications break through."),
        .init("focusModes.*.allowRepeatedCalls", .bool(default: true), "N7: a second call from a sender within repeatedCallWindow breaks through."),
        .init("focusModes.*.schedule", .objects, "N8: windows in which the mode turns on by itself."),
        .init("focusModes.*.schedule[].weekdays", .strings(default: []), "N8: days the window starts on (monday…sunday)."),
        .init("focusModes.*.schedule[].start", .string(default: nil, allowed: nil), "N8: start, HH:MM local."),
        .init("focusModes.*.schedule[].end", .string(default: nil, allowed: nil), "N8: end, HH:MM local; may cross midnight."),
        .init("summaryTimes", .strings(default: ["08:00", "18:00"]), "N9: scheduled summary times, HH:MM local."),
        .init("bursts", .object, "N11: bursts and cooldown."),
        .init("bursts.audibleAlertInterval", .number(default: 1, range: 0...3600, unit: "s"), "N11: at most one audible alert per app per this interval."),
        .init("bursts.coalesceAbovePerSecond", .integer(default: 5, range: 1...1000, unit: "updates/s"), "N11: updates above this rate per app are coalesced."),
        .init("bursts.maxDeliveredPerApp", .integer(default: 50, range: 1...100000, unit: "notifications"), "N11: the center keeps at most this many per app."),
        .init("bursts.maxDeliveredTotal", .integer(default: 1000, range: 1...1000000, unit: "notifications"),
              "N11, N15: the center keeps at most this many over all apps, oldest dropped first."),
        .init("bursts.cooldown", .objects, "N11: cooldown steps per app and thread."),
        .init("bursts.cooldown[].within", .number(default: 0, range: 0...86400, unit: "s"), "N11: an alert less than this after the previous one…"),
        .init("bursts.cooldown[].volume", .number(default: 0, range: 0...1, unit: "0…1"), "N11: …plays at this volume."),
        .init("repeatedCallWindow", .number(default: 180, range: 0...86400, unit: "s"), "N7: window for a repeated call to break through."),
        .init("minimumRepeatingInterval", .number(default: 60, range: 1...86400, unit: "s"), "N8: shortest repeating interval trigger."),
        .init("maxPendingPerApp", .integer(default: 64, range: 1...100000, unit: "notifications"),
              "N8: notifications one app may have waiting for a trigger; a new one beyond is refused (limitReached)."),
        .init("maxPendingTotal", .integer(default: 1000, range: 1...1000000, unit: "notifications"),
              "N8: notifications all apps together may have waiting for a trigger; a new one beyond is refused (limitReached)."),
        .init("maxApps", .integer(default: 4096, range: 1...1000000, unit: "apps"),
              "Apps the daemon keeps a record of; a new one beyond takes the place of the least recently seen that holds no choice of the user's and nothing waiting, else is refused (limitReached)."),
        .init("placeholderText", .string(default: "Notification", allowed: nil), "N13: body shown when previews are hidden."),
        .init("timeZone", .string(default: nil, allowed: nil), "N8: IANA time zone for wall-clock triggers and schedules; null = the system's."),
        .init("maxActionsPerCategory", .integer(default: 4, range: 0...64, unit: "actions"), "N14: actions per category."),
        .init("defaultCriticalVolume", .number(default: 1, range: 0...1, unit: "0…1"), "N3: volume of a critical sound that names none."),
        .init("missedTriggerTolerance", .number(default: 60, range: 0...86400, unit: "s"), "N15: a trigger later than this counts as missed (marked late)."),
        .init("decisionLogLimit", .integer(default: 200, range: 10...1000000, unit: "decisions"), "N16: decisions kept for explain."),
        .init("decisionHistoryPerNotification", .integer(default: 20, range: 0...1000, unit: "decisions"),
              "N16: decisions of replaced entries (N10) kept with each notification in the center."),
    ]

    /// Remote notifications through an MQTT broker (issue 11, REMOTE.md).
    /// The broker connection is made once, at start: every key is ``ConfigKey/readAtStartOnly``.
    static let remote: [ConfigKey] = readAtStartOnly([
        .init("remote", .object, "Remote notifications from a provider through an MQTT broker (REMOTE.md)."),
        .init("remote.broker", .string(default: nil, allowed: nil),
              "mqtt://HOST[:PORT] (1883) or mqtts://HOST[:PORT] (TLS, 8883); null = no remote notifications."),
        .init("remote.fallbackBrokers", .strings(default: []),
              "Other brokers (the other nodes of a cluster), tried in order when the broker cannot be reached; the same scheme as remote.broker."),
        .init("remote.deviceId", .string(default: nil, allowed: nil),
              "This device's id (letters, digits, . _ -): the MQTT client id, the username by default and a level of its topics. Needed with a broker."),
        .init("remote.username", .string(default: nil, allowed: nil), "The broker username; null = the device id."),
        .init("remote.passwordFile", .string(default: nil, allowed: nil),
              "A file whose first line is the broker password (never in the config or on a command line); null = no password."),
        .init("remote.caFile", .string(default: nil, allowed: nil), "PEM file of the CA of the broker's certificate (mqtts://); null = the system's CAs."),
        .init("remote.topicPrefix", .string(default: "interlude/devices", allowed: nil),
              "Topics: PREFIX/DEVICE/notifications (read) and PREFIX/DEVICE/receipts (written)."),
        .init("remote.maxMessageBytes", .integer(default: 16384, range: 256...262144, unit: "bytes"),
              "A larger message is malformed: acknowledged, never delivered, reported in a receipt and the log."),
        .init("remote.dedupeWindow", .integer(default: 1000, range: 16...100000, unit: "messages"),
              "How many recent message ids are kept (with the notification state, N15) to recognize a message the broker delivers again."),
        .init("remote.keepaliveSeconds", .integer(default: 30, range: 5...3600, unit: "s"), "MQTT keepalive."),
    ])

    /// `keys`, each marked ``ConfigKey/readAtStartOnly``.
    static func readAtStartOnly(_ keys: [ConfigKey]) -> [ConfigKey] { keys.map { $0.atStartOnly() } }

    /// The key spec for a concrete path like `focusModes.sleep.allowedApps`, matching `*` segments.
    public static func key(for path: [String]) -> ConfigKey? {
        let exact = path.joined(separator: ".")
        if let k = index[exact] { return k }
        return keys.first { k in
            let parts = k.path.split(separator: ".").map(String.init)
            return parts.count == path.count && zip(parts, path).allSatisfy { $0 == "*" || $0 == $1 }
        }
    }
    /// The value keys marked ``ConfigKey/readAtStartOnly``, in schema order: a reload (`SIGHUP`,
    /// `interlude reload`) leaves them at their starting values and says which ones differ.
    public static let restartOnly: [String] = keys.filter {
        if case .object = $0.kind { false } else { $0.readAtStartOnly }
    }.map(\.path)

    static let index: [String: ConfigKey] = Dictionary(keys.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
}
