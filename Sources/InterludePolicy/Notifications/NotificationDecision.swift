/// Stable error codes of notification requests (DESIGN "Protocol": codes separate from text).
public enum NotificationErrorCode: String, Codable, Sendable, Hashable {
    /// The app is not authorized (N1), or asked for something it was not granted.
    case notAuthorized
    /// A promotional request without the marketing opt-in, or at `timeSensitive`/`critical` (N6).
    case promotionalNotAllowed
    /// A category with more actions than allowed (N14).
    case tooManyActions
    /// A malformed request: bad identifier, out-of-range number, a trigger that never fires or
    /// repeats faster than allowed (N8), an unknown focus name.
    case badRequest
    /// The notification or action named does not exist.
    case notFound
    /// A standalone sound within the per-app audible alert interval (N11, N17).
    case rateLimited
    /// A count limit is reached: an app's, or all apps', notifications waiting for a trigger
    /// (`maxPendingPerApp`, `maxPendingTotal`, N8). Nothing was changed.
    case limitReached
}

/// The sound a decision lets play: name, volume and what it may bypass (N3, N11, S4).
public struct NotificationSoundDecision: Codable, Sendable, Equatable {
    /// Sound name to look up (S2).
    public var name: String
    /// Linear volume 0…1 (critical volume, or 1 × the N11 cooldown factor).
    public var volume: Double
    /// Plays through ringer-silent, focus and a call (critical only, N3).
    public var bypassRingerAndFocus: Bool
    /// The output is unmuted for the sound's length, then restored (critical only, N3).
    public var unmuteOutput: Bool

    /// Makes a sound decision.
    public init(name: String, volume: Double, bypassRingerAndFocus: Bool = false, unmuteOutput: Bool = false) {
        self.name = name
        self.volume = volume
        self.bypassRingerAndFocus = bypassRingerAndFocus
        self.unmuteOutput = unmuteOutput
    }
}

/// What the policy decided about one notification or standalone sound, and which rules made it (N16).
public struct NotificationDecision: Codable, Sendable, Equatable {
    /// The outcome of a decision.
    public enum Outcome: Codable, Sendable, Equatable, CustomStringConvertible {
        /// In the center, with banner and sound as `banner`/`sound` say.
        case delivered
        /// Not yet delivered: waiting for a trigger (N8), the scheduled summary (N9) or the end of a
        /// coalescing window (N11), until the instant given (nil = unknown).
        case held(until: NotificationTime?)
        /// In the center, but no sound and no banner (focus N7, passive N5, provisional N1).
        case silenced
        /// Delivered at a lower level than requested (N3 critical without entitlement, N4
        /// time-sensitive not allowed by the app's setting).
        case downgraded(from: InterruptionLevel, to: InterruptionLevel)
        /// Refused with a stable error code.
        case rejected(NotificationErrorCode)

        private enum CodingKeys: String, CodingKey { case kind, until, from, to, code }

        /// As the daemon's log says it: `delivered`, `held until 2026-12-02T15:00:00Z`, `silenced`,
        /// `downgraded critical→active`, `rejected notAuthorized`.
        public var description: String {
            switch self {
            case .delivered: "delivered"
            case let .held(until): until.map { "held until \($0.iso8601)" } ?? "held"
            case .silenced: "silenced"
            case let .downgraded(from, to): "downgraded \(from)→\(to)"
            case let .rejected(code): "rejected \(code.rawValue)"
            }
        }

        /// Encodes as a flat object: `{"kind": "delivered"}`, `{"kind": "held", "until": 1764…}`,
        /// `{"kind": "silenced"}`, `{"kind": "downgraded", "from": "critical", "to": "active"}`,
        /// `{"kind": "rejected", "code": "notAuthorized"}` (the protocol's shape).
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            switch self {
            case .delivered: try c.encode("delivered", forKey: .kind)
            case let .held(until):
                try c.encode("held", forKey: .kind)
                try c.encodeIfPresent(until, forKey: .until)
            case .silenced: try c.encode("silenced", forKey: .kind)
            case let .downgraded(from, to):
                try c.encode("downgraded", forKey: .kind)
                try c.encode(from, forKey: .from)
                try c.encode(to, forKey: .to)
            case let .rejected(code):
                try c.encode("rejected", forKey: .kind)
                try c.encode(code, forKey: .code)
            }
        }

        /// Decodes the flat object ``encode(to:)`` writes.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            switch try c.decode(String.self, forKey: .kind) {
            case "delivered": self = .delivered
            case "held": self = .held(until: try c.decodeIfPresent(NotificationTime.self, forKey: .until))
            case "silenced": self = .silenced
            case "downgraded": self = .downgraded(from: try c.decode(InterruptionLevel.self, forKey: .from),
                                                  to: try c.decode(InterruptionLevel.self, forKey: .to))
            case "rejected": self = .rejected(try c.decode(NotificationErrorCode.self, forKey: .code))
            case let other:
                throw DecodingError.policyValue(at: c.codingPath + [CodingKeys.kind], "unknown outcome \(other)")
            }
        }
    }

    /// The outcome.
    public var outcome: Outcome
    /// The level the request asked for.
    public var requestedLevel: InterruptionLevel
    /// The level it was treated as (after N3/N4 downgrades).
    public var level: InterruptionLevel
    /// Whether a banner shows.
    public var banner: Bool
    /// The sound that plays, or nil for none.
    public var sound: NotificationSoundDecision?
    /// The app's badge after this decision, if it changed (N12).
    public var badge: Int?
    /// POLICY.md ids of the rules that made the decision, in the order they applied (N16), e.g.
    /// `["N7"]` for a notification silenced by focus. A plain delivery says `["N1"]`.
    public var rules: [String]
    /// Short human-readable reasons, for `interlude explain`.
    public var notes: [String]

    /// Makes a decision; repeated rule ids are kept once, in first-seen order.
    public init(outcome: Outcome, requestedLevel: InterruptionLevel, level: InterruptionLevel, banner: Bool = false,
                sound: NotificationSoundDecision? = nil, badge: Int? = nil, rules: [String] = [], notes: [String] = []) {
        self.outcome = outcome
        self.requestedLevel = requestedLevel
        self.level = level
        self.banner = banner
        self.sound = sound
        self.badge = badge
        var unique: [String] = []
        for r in rules where !unique.contains(r) { unique.append(r) }
        self.rules = unique
        self.notes = notes
    }
}

/// A decision kept for explanation (N16): which notification, when, and what was decided.
public struct NotificationDecisionRecord: Codable, Sendable, Equatable {
    // The fields in one immutable shared box, as `DeliveredNotification` (issue 9): the decision
    // log is copied and diffed on every request; a copy is one retain.
    struct Fields: Codable, Sendable, Equatable {
        var app: String
        var identifier: String
        var time: NotificationTime
        var decision: NotificationDecision
    }
    /// Immutable: a change of a field makes a new box.
    final class Storage: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }
    private var storage: Storage

    private mutating func change(_ body: (inout Fields) -> Void) {
        var f = storage.fields
        body(&f)
        storage = Storage(f)
    }

    /// App id.
    public var app: String {
        get { storage.fields.app }
        set { change { $0.app = newValue } }
    }
    /// Notification identifier (empty for a standalone sound).
    public var identifier: String {
        get { storage.fields.identifier }
        set { change { $0.identifier = newValue } }
    }
    /// When it was decided.
    public var time: NotificationTime {
        get { storage.fields.time }
        set { change { $0.time = newValue } }
    }
    /// The decision.
    public var decision: NotificationDecision {
        get { storage.fields.decision }
        set { change { $0.decision = newValue } }
    }

    /// Makes a record.
    public init(app: String, identifier: String, time: NotificationTime, decision: NotificationDecision) {
        storage = Storage(Fields(app: app, identifier: identifier, time: time, decision: decision))
    }

    public init(from decoder: any Decoder) throws { storage = Storage(try Fields(from: decoder)) }
    public func encode(to encoder: any Encoder) throws { try storage.fields.encode(to: encoder) }
    public static func == (a: Self, b: Self) -> Bool { a.storage === b.storage || a.storage.fields == b.storage.fields }
}
