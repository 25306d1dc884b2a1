/// The vocabulary of audio sessions, as in iOS's AVAudioSession (POLICY.md part A).

/// What an audio session is for. Decides whether it mixes with others by default and whether the
/// ringer switch silences it (POLICY.md table in part A).
public enum AudioCategory: String, Codable, Sendable, CaseIterable {
    case ambient, soloAmbient, playback, record, playAndRecord

    /// Whether a session of this category mixes with others without any option (only `ambient`).
    public var mixesByDefault: Bool { self == .ambient }
    /// Whether ringer-silent mutes this category's streams (A12: `ambient` and `soloAmbient`).
    public var silencedByRinger: Bool { self == .ambient || self == .soloAmbient }
}

/// A specialisation of a category (POLICY.md part A).
public enum AudioMode: String, Codable, Sendable, CaseIterable {
    case `default`, spokenAudio, voicePrompt, voiceChat, videoChat, moviePlayback

    /// `voiceChat` and `videoChat` make a session a call (A4).
    public var isCall: Bool { self == .voiceChat || self == .videoChat }
}

/// Options that change how a session mixes with others.
public enum AudioSessionOption: String, Codable, Sendable, CaseIterable, Comparable {
    /// Mix with other sessions instead of interrupting them (A1).
    case mixWithOthers
    /// Duck every other active session while active (A2). Implies mixing.
    case duckOthers
    /// Interrupt spoken-audio sessions instead of ducking them (A3). Implies mixing.
    case interruptSpokenAudioAndMixWithOthers

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// The daemon-assigned identifier of an audio session (e.g. `"s12"`).
public struct AudioSessionID: RawRepresentable, Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ raw: String) { self.rawValue = raw }
    public var description: String { rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public init(from decoder: Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: Encoder) throws { var c = encoder.singleValueContainer(); try c.encode(rawValue) }
}

/// Why a session was interrupted (sent with `interruptionBegan`).
public enum InterruptionReason: String, Codable, Sendable {
    /// Another session took the audio (A1) or a prompt paused spoken audio (A3).
    case otherSession
    /// A call began (A4).
    case call
}

/// How a `voicePrompt` session should speak (A4): `short` while a call is active.
public enum PromptStyle: String, Codable, Sendable { case normal, short }

/// An audio session's state as the daemon reports it.
public enum AudioSessionState: String, Codable, Sendable {
    /// Registered, not active (never activated, deactivated, expired, or lost its activation for good).
    case inactive
    /// Active: may play.
    case active
    /// Active but interrupted: must stay paused until `interruptionEnded`.
    case interrupted
    /// Waiting for a call to end before it is activated (A4 delayed activation).
    case delayed
}

/// What an app declares when it registers an audio session.
public struct AudioSessionDescriptor: Codable, Sendable, Equatable {
    /// The owning app's id (reverse-DNS, e.g. `org.example.Music`).
    public var app: String
    public var category: AudioCategory
    public var mode: AudioMode
    public var options: Set<AudioSessionOption>
    /// `true` for sessions the daemon made for an unmodified PulseAudio client from its `media.role` (A10).
    public var implicit: Bool

    public init(app: String, category: AudioCategory = .soloAmbient, mode: AudioMode = .default,
                options: Set<AudioSessionOption> = [], implicit: Bool = false) {
        self.app = app; self.category = category; self.mode = mode; self.options = options; self.implicit = implicit
    }

    /// A session is mixable when its category mixes by default or any option implies mixing (A1).
    public var isMixable: Bool {
        category.mixesByDefault || !options.isEmpty
    }
    /// A call: `voiceChat`/`videoChat` mode (A4). Implicit sessions of `media.role=phone` have that mode.
    public var isCall: Bool { mode.isCall }
    /// Ducks others while active (A2).
    public var ducksOthers: Bool { options.contains(.duckOthers) }

    /// Why this category, mode and options do not go together, or nil if they do. As
    /// AVAudioSession (the reference system) has it: `voiceChat`/`videoChat` need `playAndRecord`
    /// (so only a real call session is a call, A4), `moviePlayback` needs `playback`,
    /// `spokenAudio` and `voicePrompt` need `playback` or `playAndRecord`, and the mixing options
    /// need `playback` or `playAndRecord` (the other categories' mixing is fixed, POLICY.md).
    public var configurationProblem: String? {
        let playing: Set<AudioCategory> = [.playback, .playAndRecord]
        let allowed: Set<AudioCategory>? = switch mode {
        case .voiceChat, .videoChat: [.playAndRecord]
        case .moviePlayback: [.playback]
        case .spokenAudio, .voicePrompt: playing
        case .default: nil
        }
        if let allowed, !allowed.contains(category) {
            let names = allowed.map(\.rawValue).sorted().joined(separator: " or ")
            return "mode \(mode.rawValue) needs category \(names), not \(category.rawValue)"
        }
        if let o = options.sorted().first, !playing.contains(category) {
            return "option \(o.rawValue) needs category playback or playAndRecord, not \(category.rawValue)"
        }
        return nil
    }
    /// Pauses spoken audio instead of ducking it (A3).
    public var interruptsSpokenAudio: Bool { options.contains(.interruptSpokenAudioAndMixWithOthers) }

    /// A10 with N3: the implicit session of a stream, or nil for the sound of a critical alert. A
    /// critical alert plays at its volume through ringer, focus and a call, so its stream has no
    /// session: nothing ducks, mutes or interrupts it, and it ducks nothing.
    public static func implicit(role: String?, app: String, criticalAlert: Bool) -> AudioSessionDescriptor? {
        criticalAlert ? nil : implicit(role: role, app: app)
    }

    /// A10: the implicit session for an unmodified client's stream with this `media.role`.
    /// `phone` → a call; `music`, `video`, `game` → `playback`; `event`, `a11y`, `navigation` →
    /// mixable with `duckOthers`. Any other role (or none) → `playback` with `mixWithOthers`, so that
    /// unknown streams are ducked and paused by others but never interrupt anyone.
    public static func implicit(role: String?, app: String) -> AudioSessionDescriptor {
        switch role {
        case "phone":
            return .init(app: app, category: .playAndRecord, mode: .voiceChat, implicit: true)
        case "music", "video", "game":
            return .init(app: app, category: .playback, mode: role == "video" ? .moviePlayback : .default, implicit: true)
        case "event", "a11y", "navigation":
            return .init(app: app, category: .playback, mode: role == "navigation" ? .voicePrompt : .default,
                         options: [.duckOthers], implicit: true)
        default:
            return .init(app: app, category: .playback, mode: .default, options: [.mixWithOthers], implicit: true)
        }
    }
}
