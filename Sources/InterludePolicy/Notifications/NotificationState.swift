/// Everything the notification policy remembers (N1, N2, N8–N12, N14, N7 focus): the engine owns
/// it, the store persists it (or its parts), `NotificationPolicy.reduce` changes it.
public struct NotificationState: Codable, Sendable, Equatable {
    /// The last instant the policy advanced to; nil before the first event. Triggers, schedule
    /// boundaries and summary times between this and `now` are processed, in order, on the next event.
    public var clock: NotificationTime?
    /// Per-app settings, authorization, categories, badge and queued responses, by app id (a map
    /// that copies in parts: a request that changes one app's record does not copy every app's).
    public var apps: NotificationAppRecords
    /// Requests waiting for their trigger (N8).
    public var pending: [PendingNotification]
    /// The notification center, oldest first.
    public var delivered: [DeliveredNotification]
    /// Notifications held for the scheduled summary (N9), in arrival order.
    public var summaryQueue: [HeldNotification]
    /// Updates held by N11 coalescing, at most one per app and identifier (the last one).
    public var coalesced: [HeldNotification]
    /// Focus state (N7).
    public var focus: NotificationFocusState
    /// Whether the ringer switch is on silent.
    public var ringerSilent: Bool
    /// Whether a call is in progress (set by the engine from the audio side, A4).
    public var callActive: Bool
    /// Timing history for N11 and N7 repeated calls.
    public var history: NotificationAlertHistory
    /// The most recent decisions, oldest first, at most `decisionLogLimit` (N16).
    public var decisionLog: [NotificationDecisionRecord]
    /// The most recent remote notifications, oldest first, each as its app and message id (issue 11: a message
    /// the broker delivers again is recognized and not delivered twice). Saved with the rest, in
    /// the same transaction as the decision it led to.
    public var remoteMessages: [String]
    /// Receipts of remote messages the device owes their providers, oldest first: each is added in
    /// the transaction of its message's decision, before it is published, and removed once the
    /// broker has acknowledged it (REMOTE.md "Receipts are owed until the broker has them"). What a restart finds here is published
    /// again: a receipt waiting in memory is not lost with the process. At most
    /// ``NotificationPolicy/maxOwedReceipts``.
    public var owedReceipts: [OwedReceipt]

    /// An empty state: no apps, nothing pending or delivered, no focus, ringer on, no call.
    public init() {
        clock = nil
        apps = NotificationAppRecords()
        pending = []
        delivered = []
        summaryQueue = []
        coalesced = []
        focus = NotificationFocusState()
        ringerSilent = false
        callActive = false
        history = NotificationAlertHistory()
        decisionLog = []
        remoteMessages = []
        owedReceipts = []
    }

    private enum CodingKeys: String, CodingKey {
        case clock, apps, pending, delivered, summaryQueue, coalesced, focus, ringerSilent, callActive, history, decisionLog
        case remoteMessages, owedReceipts
    }

    /// Decodes a state; `owedReceipts`, absent from states encoded before it, decodes as none.
    /// - Throws: `DecodingError` when a field is missing or malformed.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        clock = try c.decodeIfPresent(NotificationTime.self, forKey: .clock)
        apps = try c.decode(NotificationAppRecords.self, forKey: .apps)
        pending = try c.decode([PendingNotification].self, forKey: .pending)
        delivered = try c.decode([DeliveredNotification].self, forKey: .delivered)
        summaryQueue = try c.decode([HeldNotification].self, forKey: .summaryQueue)
        coalesced = try c.decode([HeldNotification].self, forKey: .coalesced)
        focus = try c.decode(NotificationFocusState.self, forKey: .focus)
        ringerSilent = try c.decode(Bool.self, forKey: .ringerSilent)
        callActive = try c.decode(Bool.self, forKey: .callActive)
        history = try c.decode(NotificationAlertHistory.self, forKey: .history)
        decisionLog = try c.decode([NotificationDecisionRecord].self, forKey: .decisionLog)
        remoteMessages = try c.decode([String].self, forKey: .remoteMessages)
        owedReceipts = try c.decodeIfPresent([OwedReceipt].self, forKey: .owedReceipts) ?? []
    }
}

/// A remote message's receipt not yet acknowledged by the broker (REMOTE.md "Receipts are owed until the broker has them"): the
/// message's app and id, the receipt's time (seconds since 1970) and the receipt as published
/// (JSON text, REMOTE.md's receipt format; the policy does not read it).
public struct OwedReceipt: Codable, Sendable, Equatable {
    public var app: String
    public var messageID: String
    public var time: Double
    public var payload: String
    public init(app: String, messageID: String, time: Double, payload: String) {
        self.app = app; self.messageID = messageID; self.time = time; self.payload = payload
    }
}

extension NotificationState {
    /// Whether this state differs from `other` at most in which apps are connected and in
    /// `clock`: what an app connecting or leaving changes when it has no queued responses (N14).
    /// Such a change need not be saved (N15): every app is offline after a restart, and a clock
    /// that advanced past no deadline is advanced again on the next event. The engine skips the
    /// disk sync it would cost on every connection.
    ///
    /// The fields that change on most requests (the decision log, the center) are compared first,
    /// so that a request is not charged a walk over every app's record (issue 7: with 500 apps it
    /// copied and compared them all on each `notification.add`).
    public func differsOnlyInPresence(from other: NotificationState) -> Bool {
        guard apps.count == other.apps.count, decisionLog == other.decisionLog, delivered == other.delivered,
              pending == other.pending, summaryQueue == other.summaryQueue, coalesced == other.coalesced,
              focus == other.focus, ringerSilent == other.ringerSilent, callActive == other.callActive,
              history == other.history, remoteMessages == other.remoteMessages,
              owedReceipts == other.owedReceipts else { return false }
        // Only the parts of the map a change touched (an app connecting changes one record).
        var onlyPresence = true
        apps.forEachChange(from: other.apps) { _, theirs, mine in
            guard onlyPresence, var theirs, let mine else { onlyPresence = false; return }
            theirs.connected = mine.connected
            if theirs != mine { onlyPresence = false }
        }
        return onlyPresence
    }
}

/// What the policy knows about one app.
public struct NotificationAppRecord: Codable, Sendable, Equatable {
    /// The user's settings for the app (N2), including its authorization (N1).
    public var settings: NotificationAppSettings
    /// Options the app has asked for; nil if it never requested authorization (N1).
    public var requestedOptions: [NotificationAuthorizationOption]?
    /// Registered categories by identifier (N13, N14).
    public var categories: [String: NotificationCategory]
    /// The app's badge (N12).
    public var badge: Int
    /// Whether the app is connected now (action responses are queued otherwise, N14).
    public var connected: Bool
    /// Action responses waiting for the app to connect (N14), oldest first.
    public var queuedResponses: [NotificationActionResponse]
    /// Whether the app registered for remote notifications (issue 11, N1); nil = never asked.
    public var remoteRegistered: Bool?
    /// When the app last made itself known: its record was made, or it requested authorization
    /// (N1). Which record goes first when the daemon must forget one (``NotificationPolicyConfig/maxApps``);
    /// nil in records saved before it was kept (they go first).
    public var lastSeen: NotificationTime?
    /// Whether the authorization in `settings` is the default's answer, not the user's: the
    /// config's `authorization.default` answering the app's request (N1), or `bus.authorization`
    /// answering a D-Bus app. Nil when the user answered, or in records saved before it was kept.
    public var answeredByDefault: Bool?
    /// Whether the record was made by a D-Bus notification of the app (`Notify`) and the app has
    /// not connected to the socket since: the user's responses to its notifications reach it on
    /// the bus (`ActionInvoked`) and are not queued (N14). Nil = no (a socket app's, or saved
    /// before it was kept).
    public var viaBus: Bool?

    /// A record for an app never seen before (at `lastSeen`, if given).
    public init(settings: NotificationAppSettings = .init(), lastSeen: NotificationTime? = nil) {
        self.settings = settings
        self.lastSeen = lastSeen
        requestedOptions = nil
        categories = [:]
        badge = 0
        connected = false
        queuedResponses = []
    }

    /// Whether the app requested `option` and the user's answer allows delivery.
    func granted(_ option: NotificationAuthorizationOption) -> Bool {
        requestedOptions?.contains(option) == true && isAuthorized
    }

    /// Whether the app may deliver at all: it requested authorization and is authorized or provisional (N1).
    var isAuthorized: Bool {
        requestedOptions != nil && (settings.authorization == .authorized || settings.authorization == .provisional)
    }

    /// Why the app is not authorized (N1), for a `notAuthorized` error; nil when it is. An app
    /// that never asked is not authorized even if the user granted it (`interlude auth APP grant`)
    /// — what it asked for (alert, sound, badge) decides what it gets.
    var notAuthorizedReason: String? {
        if isAuthorized { return nil }
        if requestedOptions == nil { return "the app has not requested authorization (N1: it asks first, then the user's answer applies)" }
        return "notifications are \(settings.authorization.rawValue) for this app (N1)"
    }

    /// Whether the badge is kept for this app (N12).
    var badgesOn: Bool { settings.badge && granted(.badge) }

    /// Whether the daemon may forget this record to stay within ``NotificationPolicyConfig/maxApps``:
    /// it holds no choice of the user's, no answer of the user's waiting for the app, and the app
    /// is not connected. That is: every setting at its default, the authorization undetermined or
    /// the default's answer (``answeredByDefault``), no queued action responses (N14). What the
    /// app declared itself (the options it asked for, its categories, its badge, its remote
    /// registration) does not keep it: an app forgotten declares them again, as after a
    /// reinstall (a socket app must request authorization again before its next notification,
    /// N1; a D-Bus app's next `Notify` does it for it). Otherwise any app could make records that
    /// never go, under as many names as it likes. What the app has in the center or waiting is
    /// checked by the caller.
    var mayBeForgotten: Bool {
        var others = settings
        others.authorization = .notDetermined
        guard others == NotificationAppSettings(), queuedResponses.isEmpty, !connected else { return false }
        return settings.authorization == .notDetermined || answeredByDefault == true
    }
}

/// A request waiting for its trigger (N8).
public struct PendingNotification: Codable, Sendable, Equatable {
    /// App id.
    public var app: String
    /// The request.
    public var request: NotificationRequest
    /// Executable path of the peer that added it (N3 entitlement).
    public var peerExecutablePath: String?
    /// When it was added.
    public var addedAt: NotificationTime
    /// When it fires next.
    public var fireAt: NotificationTime

    /// Makes a pending entry.
    public init(app: String, request: NotificationRequest, peerExecutablePath: String?, addedAt: NotificationTime,
                fireAt: NotificationTime) {
        self.app = app
        self.request = request
        self.peerExecutablePath = peerExecutablePath
        self.addedAt = addedAt
        self.fireAt = fireAt
    }
}

/// A request held for the summary (N9) or by coalescing (N11).
public struct HeldNotification: Codable, Sendable, Equatable {
    /// App id.
    public var app: String
    /// The request.
    public var request: NotificationRequest
    /// Executable path of the peer that added it (N3).
    public var peerExecutablePath: String?
    /// When it was held (N9 orders ties by this).
    public var heldAt: NotificationTime
    /// When it is released (coalescing); nil for the summary (next summary time).
    public var until: NotificationTime?

    /// Makes a held entry.
    public init(app: String, request: NotificationRequest, peerExecutablePath: String?, heldAt: NotificationTime,
                until: NotificationTime?) {
        self.app = app
        self.request = request
        self.peerExecutablePath = peerExecutablePath
        self.heldAt = heldAt
        self.until = until
    }
}

extension NotificationState {
    /// The index in `delivered` of `app`'s notification `identifier` (N10: at most one), if any.
    func deliveredIndex(of identifier: String, app: String) -> Int? {
        let key = CenterKey(app: app, identifier: identifier)
        return delivered.firstIndex { $0.isEntry(key, app: app, identifier: identifier) }
    }

    /// The last such index (the newest, should a loaded state hold two).
    func lastDeliveredIndex(of identifier: String, app: String) -> Int? {
        let key = CenterKey(app: app, identifier: identifier)
        return delivered.lastIndex { $0.isEntry(key, app: app, identifier: identifier) }
    }
}

/// Hashes of an app id and of an app's notification identifier, so that a walk of the center
/// (N10's search for an identifier, N11's count of an app's entries: on every add) compares a
/// number per entry, not two strings read through the entry's box (issue 9: an add cost 39 µs at
/// the default 1,000 entries against 13 µs in an empty center, and 1.7 ms at 60,000). Per
/// process (Swift's hashing is seeded at start): never saved.
struct CenterKey: Sendable, Equatable {
    /// Hash of the app id.
    let app: Int
    /// Hash of the app id and the identifier together.
    let entry: Int
    init(app: String, identifier: String) {
        self.app = Self.hash(app)
        var e = Hasher()
        e.combine(app)
        e.combine(identifier)
        entry = e.finalize()
    }

    /// The key of an app alone, for ``DeliveredNotification/isOf(_:app:)`` (its `entry` is 0 and
    /// means nothing).
    init(app: String) {
        self.app = Self.hash(app)
        entry = 0
    }

    private static func hash(_ app: String) -> Int {
        var a = Hasher()
        a.combine(app)
        return a.finalize()
    }
}

/// A notification in the center.
///
/// Its fields live in one immutable, reference-counted box that copies share until one of them
/// changes a field (which makes a new box): the center is copied, compared and diffed on every
/// request (the engine keeps the state before the request, the store's differ the one it saved,
/// N15), and with the fields inline each copy of a 1,000-entry center retained some twenty
/// strings and arrays per entry, most of the daemon's time under a burst (issue 9). Now a copy
/// is one retain, and an unchanged entry is recognized by its box alone. The value semantics,
/// the API and the JSON (the same keys: saved states open unchanged) are those of a plain struct.
public struct DeliveredNotification: Codable, Sendable, Equatable {
    /// The stored fields (the JSON shape of the type).
    struct Fields: Codable, Sendable, Equatable {
        var app: String
        var request: NotificationRequest
        var deliveredAt: NotificationTime
        var late: Bool
        var decision: NotificationDecision
        var earlierDecisions: [NotificationDecisionRecord]?
    }
    /// Immutable: a change of a field makes a new box, so a box is never changed while shared.
    final class Storage: Sendable {
        let fields: Fields
        /// The entry's ``CenterKey``, made once per box: derived from `fields`, not saved, not compared.
        let key: CenterKey
        init(_ fields: Fields) {
            self.fields = fields
            key = CenterKey(app: fields.app, identifier: fields.request.identifier)
        }
    }
    private var storage: Storage

    /// Whether this is `app`'s notification `identifier` (N10's key: an app's identifier names one
    /// entry). `key` is `CenterKey(app: app, identifier: identifier)`, made once for a walk of the
    /// center: the hashes are compared first, the strings only where they match.
    @inline(__always)
    func isEntry(_ key: CenterKey, app: String, identifier: String) -> Bool {
        storage.key.entry == key.entry && storage.fields.app == app && storage.fields.request.identifier == identifier
    }

    /// Whether this entry is `app`'s (`key` is `CenterKey(app: app)`, made once for a walk).
    @inline(__always)
    func isOf(_ key: CenterKey, app: String) -> Bool {
        storage.key.app == key.app && storage.fields.app == app
    }

    /// App id.
    public var app: String {
        get { storage.fields.app }
        set { var f = storage.fields; f.app = newValue; storage = Storage(f) }
    }
    /// The request as delivered (full content; watchers see `NotificationView`, N13).
    public var request: NotificationRequest {
        get { storage.fields.request }
        set { var f = storage.fields; f.request = newValue; storage = Storage(f) }
    }
    /// When it was delivered.
    public var deliveredAt: NotificationTime {
        get { storage.fields.deliveredAt }
        set { var f = storage.fields; f.deliveredAt = newValue; storage = Storage(f) }
    }
    /// Whether its trigger was missed while the daemon was down and it is delivered late (N15).
    public var late: Bool {
        get { storage.fields.late }
        set { var f = storage.fields; f.late = newValue; storage = Storage(f) }
    }
    /// The decision that delivered it (N16).
    public var decision: NotificationDecision {
        get { storage.fields.decision }
        set { var f = storage.fields; f.decision = newValue; storage = Storage(f) }
    }
    /// The decisions of the entries this one replaced (N10), oldest first, at most the config's
    /// `decisionHistoryPerNotification`; nil when it replaced none (N16).
    public var earlierDecisions: [NotificationDecisionRecord]? {
        get { storage.fields.earlierDecisions }
        set { var f = storage.fields; f.earlierDecisions = newValue; storage = Storage(f) }
    }

    /// Makes a delivered entry.
    public init(app: String, request: NotificationRequest, deliveredAt: NotificationTime, late: Bool,
                decision: NotificationDecision) {
        storage = Storage(Fields(app: app, request: request, deliveredAt: deliveredAt, late: late, decision: decision,
                                 earlierDecisions: nil))
    }

    public init(from decoder: any Decoder) throws { storage = Storage(try Fields(from: decoder)) }
    public func encode(to encoder: any Encoder) throws { try storage.fields.encode(to: encoder) }
    public static func == (a: Self, b: Self) -> Bool { a.storage === b.storage || a.storage.fields == b.storage.fields }
}

/// Focus state (N7): the user's override, the focus in effect, and what it silenced.
public struct NotificationFocusState: Codable, Sendable, Equatable {
    /// The user's manual choice, which beats schedules while it lasts.
    public enum Override: Codable, Sendable, Equatable {
        /// Focus `name` on, until the instant (nil = until turned off).
        case on(name: String, until: NotificationTime?)
        /// Focus off until the instant (the end of the schedule window it was turned off in).
        case off(until: NotificationTime)
    }

    /// The focus in effect.
    public struct Active: Codable, Sendable, Equatable {
        /// Focus mode name (a key of `focusModes`).
        public var name: String
        /// When it began.
        public var since: NotificationTime
        /// Whether it is on by the user's hand (else by schedule).
        public var manual: Bool

        /// Makes an active focus.
        public init(name: String, since: NotificationTime, manual: Bool) {
            self.name = name
            self.since = since
            self.manual = manual
        }
    }

    /// The user's override, if any.
    public var override: Override?
    /// The focus in effect, if any.
    public var active: Active?
    /// Notifications silenced by the focus in effect, for the one summary at its end.
    public var missed: [NotificationMissedEntry]

    /// No focus.
    public init() {
        override = nil
        active = nil
        missed = []
    }
}

/// A notification silenced by focus (N7), listed in the "missed during focus" event.
public struct NotificationMissedEntry: Codable, Sendable, Equatable {
    /// App id.
    public var app: String
    /// Notification identifier.
    public var identifier: String
    /// Title (bodies are never listed).
    public var title: String
    /// When it was delivered.
    public var time: NotificationTime

    /// Makes an entry.
    public init(app: String, identifier: String, title: String, time: NotificationTime) {
        self.app = app
        self.identifier = identifier
        self.title = title
        self.time = time
    }
}

/// Timing history for N11 (rate, cooldown, coalescing) and N7 (repeated calls).
public struct NotificationAlertHistory: Codable, Sendable, Equatable {
    /// Last audible alert per app (N11 "one audible alert per app per second").
    public var lastAudible: [String: NotificationTime]
    /// Last alert per app, then per thread (`""` for none): the N11 cooldown clock.
    public var lastAlert: [String: [String: NotificationTime]]
    /// Recent update times per app (within the last second), for coalescing.
    public var updates: [String: [NotificationTime]]
    /// Last incoming call per sender (N7 repeated calls).
    public var calls: [String: NotificationTime]

    /// No history.
    public init() {
        lastAudible = [:]
        lastAlert = [:]
        updates = [:]
        calls = [:]
    }
}
