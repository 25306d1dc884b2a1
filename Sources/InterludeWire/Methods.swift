import InterludePolicy

/// Method names (PROTOCOL.md "Methods").
public enum WireMethod {
    public static let hello = "hello"
    public static let sessionRegister = "session.register"
    public static let sessionActivate = "session.activate"
    public static let sessionDeactivate = "session.deactivate"
    public static let sessionSetPlaying = "session.setPlaying"
    public static let status = "status"
    public static let subscribe = "subscribe"
    public static let soundPlay = "sound.play"
    public static let ringerSet = "ringer.set"
    public static let configReload = "config.reload"
}

/// Event names (PROTOCOL.md "Events").
public enum WireEventName {
    public static let interruptionBegan = "interruptionBegan"
    public static let interruptionEnded = "interruptionEnded"
    public static let duckChanged = "duckChanged"
    public static let activated = "activated"
    public static let expired = "expired"
    public static let enforcement = "enforcement"
    public static let soundPlayed = "soundPlayed"
    public static let ringerChanged = "ringerChanged"
}

/// `hello`: the first request, naming the app.
public struct HelloParams: WireParams, Equatable {
    public static let fields: Set<String> = ["app", "protocol"]
    /// Reverse-DNS app id, 1…255 bytes of UTF-8.
    public var app: String
    public var `protocol`: Int?
    public init(app: String, protocol: Int? = interludeProtocolVersion) { self.app = app; self.protocol = `protocol` }
}
public struct HelloResult: Codable, Sendable, Equatable {
    /// The connection's client number (used in `status`).
    public var client: Int
    public var pid: Int32
    public init(client: Int, pid: Int32) { self.client = client; self.pid = pid }
}

/// `session.register`: declares an audio session (inactive until activated).
public struct RegisterParams: WireParams, Equatable {
    public static let fields: Set<String> = ["category", "mode", "options"]
    public var category: AudioCategory?
    public var mode: AudioMode?
    public var options: [AudioSessionOption]?
    public init(category: AudioCategory, mode: AudioMode = .default, options: [AudioSessionOption] = []) {
        self.category = category; self.mode = mode; self.options = options
    }
}
public struct RegisterResult: Codable, Sendable, Equatable {
    /// The session id; tag your PulseAudio streams with the property `interlude.session` = this id.
    public var session: AudioSessionID
    public init(session: AudioSessionID) { self.session = session }
}

/// `session.activate`.
public struct ActivateParams: WireParams, Equatable {
    public static let fields: Set<String> = ["session", "acceptsDelay"]
    public var session: AudioSessionID
    /// A4: wait for a call to end instead of failing with `insufficientPriority`.
    public var acceptsDelay: Bool?
    public init(session: AudioSessionID, acceptsDelay: Bool = false) { self.session = session; self.acceptsDelay = acceptsDelay }
}
public struct ActivateResult: Codable, Sendable, Equatable {
    /// `active` or `delayed`.
    public var state: AudioSessionState
    public var promptStyle: PromptStyle?
    public var ducked: Bool
    public init(state: AudioSessionState, promptStyle: PromptStyle?, ducked: Bool) {
        self.state = state; self.promptStyle = promptStyle; self.ducked = ducked
    }
}

/// `session.deactivate`.
public struct DeactivateParams: WireParams, Equatable {
    public static let fields: Set<String> = ["session", "notifyOthers"]
    public var session: AudioSessionID
    /// `notifyOthersOnDeactivation`: lets interrupted sessions resume (A5). Default true.
    public var notifyOthers: Bool?
    public init(session: AudioSessionID, notifyOthers: Bool = true) { self.session = session; self.notifyOthers = notifyOthers }
}

/// `session.setPlaying`: the app says whether it is playing (used when its streams cannot be matched).
public struct SetPlayingParams: WireParams, Equatable {
    public static let fields: Set<String> = ["session", "playing"]
    public var session: AudioSessionID
    public var playing: Bool
    public init(session: AudioSessionID, playing: Bool) { self.session = session; self.playing = playing }
}

/// `subscribe`: receive every event of the daemon, not only your own sessions'.
public struct SubscribeParams: WireParams, Equatable {
    public static let fields: Set<String> = []
    public init() {}
}

/// `status` takes no params.
public struct StatusParams: WireParams, Equatable {
    public static let fields: Set<String> = []
    public init() {}
}

/// One stream (sink input) in `status`.
public struct StreamStatus: Codable, Sendable, Equatable {
    public var index: UInt32
    public var pid: Int32?
    public var role: String?
    public var corked: Bool
    public var muted: Bool
    /// The user's volume, dB; the gain the daemon applies on top, dB.
    public var userVolumeDb: Double
    public var gainDb: Double
    public init(index: UInt32, pid: Int32?, role: String?, corked: Bool, muted: Bool, userVolumeDb: Double, gainDb: Double) {
        self.index = index; self.pid = pid; self.role = role; self.corked = corked; self.muted = muted
        self.userVolumeDb = userVolumeDb; self.gainDb = gainDb
    }
}

/// One session in `status`.
public struct SessionStatus: Codable, Sendable, Equatable {
    public var session: AudioSessionID
    public var app: String
    public var client: Int?
    public var category: AudioCategory
    public var mode: AudioMode
    public var options: [AudioSessionOption]
    public var implicit: Bool
    public var state: AudioSessionState
    public var playing: Bool
    public var ducked: Bool
    /// The duck gain, dB (0 when not ducked).
    public var duckDb: Double
    public var muted: Bool
    /// The sessions interrupting it (A6), by id; at most ``StatusResult/maxListedPerSession``.
    public var interruptedBy: [AudioSessionID]
    /// How many of the sessions interrupting it are not in `interruptedBy`; absent when none is
    /// left out.
    public var interruptedByOmitted: Int?
    /// Its streams, by index; at most ``StatusResult/maxListedPerSession``.
    public var streams: [StreamStatus]
    /// How many of its streams are not in `streams`; absent when none is left out.
    public var streamsOmitted: Int?
    public init(session: AudioSessionID, app: String, client: Int?, category: AudioCategory, mode: AudioMode,
                options: [AudioSessionOption], implicit: Bool, state: AudioSessionState, playing: Bool, ducked: Bool,
                duckDb: Double, muted: Bool, interruptedBy: [AudioSessionID], streams: [StreamStatus]) {
        self.session = session; self.app = app; self.client = client; self.category = category; self.mode = mode
        self.options = options; self.implicit = implicit; self.state = state; self.playing = playing
        self.ducked = ducked; self.duckDb = duckDb; self.muted = muted; self.interruptedBy = interruptedBy; self.streams = streams
    }
}

/// `status` result.
public struct StatusResult: Codable, Sendable, Equatable {
    /// Most sessions one `status` reply lists: 256 sessions with a few streams each are ~100 KB of
    /// JSON, a tenth of the default `server.maxOutputBytes`.
    public static let maxSessionsListed = 256
    /// Most streams, and most interrupting sessions, one session's entry lists (PulseAudio takes
    /// up to 256 streams per sink; 8,191 sessions can interrupt one, A3): an entry is then at
    /// most about 14 KB, under a page at the smallest `server.maxOutputBytes`.
    public static let maxListedPerSession = 32
    public var version: String
    /// Whether the daemon is connected to the audio server.
    public var audioConnected: Bool
    /// The audio server's name for itself while connected (e.g. "pulseaudio").
    public var audioServer: String?
    /// Why sounds are not played now although the server is connected (it left a call unanswered
    /// and is left alone for a few seconds, PulseSoundPlayer); nil when sounds go to the server
    /// (and in replies of daemons before it was added).
    public var soundsUnavailable: String?
    public var ringer: String
    /// The audio sessions, by id; at most ``StatusResult/maxSessionsListed``, and as many as fit
    /// a page (256 KiB of JSON, a quarter of `server.maxOutputBytes` when that is under 1 MiB),
    /// those doing something (active, interrupted, delayed, playing, ducked, with streams) chosen
    /// before idle ones.
    public var sessions: [SessionStatus]
    /// How many registered sessions are not in `sessions` (the list's bound keeps the reply far
    /// under `server.maxOutputBytes`); absent when none is left out.
    public var sessionsOmitted: Int?
    /// Streams not matched to any session (for example ours, or ones without a role), by index;
    /// as many as fit a page (as `sessions`).
    public var unmatchedStreams: [StreamStatus]
    /// How many unmatched streams are not in `unmatchedStreams`; absent when none is left out.
    public var unmatchedStreamsOmitted: Int?
    public var samples: [String]
    /// The config files in force, in the order read (later ones override), for the user to see
    /// which were read; absent from daemons before it was added.
    public var configFiles: [String]?
    /// The session bus side (org.freedesktop.Notifications); nil when the daemon has none.
    public var bus: BusStatus?
    /// MPRIS media players on the session bus (issue 10), by session id; as many as fit a page
    /// (as `sessions`); nil when the daemon does not watch them.
    public var players: [PlayerStatus]?
    /// How many players are not in `players`; absent when none is left out.
    public var playersOmitted: Int?
    public init(version: String, audioConnected: Bool, audioServer: String?, ringer: String,
                sessions: [SessionStatus], unmatchedStreams: [StreamStatus], samples: [String]) {
        // (`sessionsOmitted` is set by the daemon after the list is bounded.)
        self.version = version; self.audioConnected = audioConnected; self.audioServer = audioServer
        self.ringer = ringer; self.sessions = sessions; self.unmatchedStreams = unmatchedStreams; self.samples = samples
    }
}

/// One MPRIS media player in `status` (issue 10): its facts on the bus and what Interlude did.
public struct PlayerStatus: Codable, Sendable, Equatable {
    /// Its bus name (`org.mpris.MediaPlayer2.mpv`).
    public var player: String
    /// The implicit session it is (`p1`, …; A10).
    public var session: AudioSessionID
    /// The name it goes by (`Identity`, else the bus name's last part).
    public var app: String
    /// The bus peer's pid, which its streams are matched by.
    public var pid: Int32?
    /// `PlaybackStatus`: `Playing`, `Paused` or `Stopped`.
    public var status: String
    public var canPause: Bool
    public var canPlay: Bool
    public var canControl: Bool
    /// What Interlude last did: `none`, `paused`, `muted`, `resumed`, `leftAlonePausedBefore`,
    /// `leftAloneUserTouched`, `leftAloneNoResume`.
    public var action: String
    /// The rule that decided `action` (A3, A4, A5, A8).
    public var rule: String?
    public init(player: String, session: AudioSessionID, app: String, pid: Int32?, status: String, canPause: Bool,
                canPlay: Bool, canControl: Bool, action: String, rule: String?) {
        self.player = player; self.session = session; self.app = app; self.pid = pid; self.status = status
        self.canPause = canPause; self.canPlay = canPlay; self.canControl = canControl; self.action = action; self.rule = rule
    }
}

/// The daemon on the session bus, in `status`: `mode` is `server` (it owns
/// `org.freedesktop.Notifications`), `companion` (another daemon owns it; Interlude watches and
/// plays the sounds) or `off` (no bus, or `--no-bus`).
public struct BusStatus: Codable, Sendable, Equatable {
    /// `server`, `companion` or `off`.
    public var mode: String
    /// The unique name owning `org.freedesktop.Notifications` (`:1.42`), if anyone does.
    public var nameOwner: String?
    /// The bus address it joined.
    public var address: String?
    /// Why it is off, or what it is watching.
    public var note: String?
    public init(mode: String, nameOwner: String? = nil, address: String? = nil, note: String? = nil) {
        self.mode = mode; self.nameOwner = nameOwner; self.address = address; self.note = note
    }
}

/// `sound.play`: a sound by name (S2 lookup) or path, through the sample cache (S3).
public struct SoundPlayParams: WireParams, Equatable {
    public static let fields: Set<String> = ["sound", "volume"]
    /// A name (`default`, `critical`, a freedesktop theme name) or an absolute path.
    public var sound: String
    /// Linear amplitude 0…1 (default 1).
    public var volume: Double?
    public init(sound: String, volume: Double? = nil) { self.sound = sound; self.volume = volume }
}
public struct SoundPlayResult: Codable, Sendable, Equatable {
    /// The sample actually played (the default when the requested one could not be used).
    public var played: String
    /// Why the requested sound was replaced (S1), with its stable code.
    public var warning: WireError?
    /// Length of the sound, seconds.
    public var duration: Double
    public init(played: String, warning: WireError?, duration: Double) { self.played = played; self.warning = warning; self.duration = duration }
}

/// `config.reload`: no params (the daemon re-reads the files it read at start).
public struct ReloadParams: WireParams, Equatable {
    public static let fields: Set<String> = []
    public init() {}
}

/// The reply to `config.reload`: the files now in force.
public struct ReloadResult: Codable, Sendable, Equatable {
    /// The config files read, lowest precedence first.
    public var files: [String]
    /// Keys whose new value a reload does not put in force (``ConfigSchema/restartOnly``: the
    /// server's limits, the bus service's settings, the broker): they keep the value the daemon
    /// started with until it restarts. Absent when none differs.
    public var keptUntilRestart: [String]?
    /// Limits set against each other in the new config (a per-app limit above its total: the
    /// total binds), in words with file and line; the config is in force all the same. Absent
    /// when none.
    public var warnings: [String]?
    /// How many notifications the new limits dropped at once (N11: the oldest over a lowered
    /// `bursts.maxDeliveredPerApp` or `bursts.maxDeliveredTotal`, from the center and from those
    /// held for the summary). Absent when none.
    public var dropped: Int?
    public init(files: [String], keptUntilRestart: [String]? = nil, warnings: [String]? = nil, dropped: Int? = nil) {
        self.files = files
        self.keptUntilRestart = keptUntilRestart
        self.warnings = warnings
        self.dropped = dropped
    }
}

/// `ringer.set`.
public struct RingerParams: WireParams, Equatable {
    public static let fields: Set<String> = ["mode"]
    /// `silent` or `ring`.
    public var mode: String
    public init(mode: String) { self.mode = mode }
}

/// Data of `interruptionBegan`.
public struct InterruptionBeganData: Codable, Sendable, Equatable {
    public var session: AudioSessionID
    public var reason: InterruptionReason
    public init(session: AudioSessionID, reason: InterruptionReason) { self.session = session; self.reason = reason }
}
/// Data of `interruptionEnded`.
public struct InterruptionEndedData: Codable, Sendable, Equatable {
    public var session: AudioSessionID
    public var shouldResume: Bool
    public init(session: AudioSessionID, shouldResume: Bool) { self.session = session; self.shouldResume = shouldResume }
}
/// Data of `duckChanged`: the session's streams are ducked by `levelDb` (0 = not ducked).
public struct DuckChangedData: Codable, Sendable, Equatable {
    public var session: AudioSessionID
    public var ducked: Bool
    public var levelDb: Double
    public init(session: AudioSessionID, ducked: Bool, levelDb: Double) { self.session = session; self.ducked = ducked; self.levelDb = levelDb }
}
/// Data of `activated` (a delayed activation completed, A4), `expired` (A9) and `enforcement` (A8).
public struct SessionEventData: Codable, Sendable, Equatable {
    public var session: AudioSessionID
    public var promptStyle: PromptStyle?
    public var muted: Bool?
    public init(session: AudioSessionID, promptStyle: PromptStyle? = nil, muted: Bool? = nil) {
        self.session = session; self.promptStyle = promptStyle; self.muted = muted
    }
}
