/// One sink input (a playback stream on the server) as the adapter sees it.
///
/// Volumes are in dB relative to full volume (0 dB = 100 %, PulseAudio's software scale); silence
/// (`PA_VOLUME_MUTED`, −inf dB) is reported as −200.
public struct PulseSinkInput: Sendable, Equatable {
    /// The server's index of the sink input.
    public var index: UInt32
    /// The index of the client that owns it; nil when it has none (`PA_INVALID_INDEX`).
    public var clientIndex: UInt32?
    /// `application.process.id` of the stream or, failing that, of its client (DESIGN.md: streams are
    /// matched to sessions by the peer pid).
    public var processID: Int32?
    /// The stream property `interlude.session` (set by our client library), if any.
    public var sessionTag: String?
    /// `media.role` (A10: unmodified apps get an implicit session from it).
    public var role: String?
    /// `application.name`.
    public var applicationName: String?
    /// Paused by its application.
    public var corked: Bool
    /// Muted (by anyone: the user, or the adapter through `setMute`).
    public var muted: Bool
    /// The current volume on the server, average over channels, dB (−200 for silence).
    public var volumeDb: Double
    /// The user's volume with the adapter's gain factored out (A7). Equal to `volumeDb` when the
    /// adapter applies no gain.
    public var userVolumeDb: Double
    /// The gain in dB the adapter currently applies on top of the user's volume (0 = none).
    public var gainDb: Double
    /// Every string property of the sink input (its own and, merged by the server, its client's).
    public var properties: [String: String]

    /// Memberwise initializer (for fakes and tests).
    public init(index: UInt32, clientIndex: UInt32? = nil, processID: Int32? = nil, sessionTag: String? = nil,
                role: String? = nil, applicationName: String? = nil, corked: Bool = false, muted: Bool = false,
                volumeDb: Double = 0, userVolumeDb: Double = 0, gainDb: Double = 0,
                properties: [String: String] = [:]) {
        self.index = index
        self.clientIndex = clientIndex
        self.processID = processID
        self.sessionTag = sessionTag
        self.role = role
        self.applicationName = applicationName
        self.corked = corked
        self.muted = muted
        self.volumeDb = volumeDb
        self.userVolumeDb = userVolumeDb
        self.gainDb = gainDb
        self.properties = properties
    }
}

/// What the adapter reports on `PulseConnection.events`.
public enum PulseEvent: Sendable, Equatable {
    /// The connection is ready: after `connect()` and again after every reconnect. After a reconnect
    /// the server is a new one as far as the owner knows: re-upload samples and re-apply gains and
    /// mutes (DESIGN.md "Audio mechanics"). `sinkInputAdded` follows for every existing sink input.
    case connected
    /// The server went away. Every sink input is gone with it (no `sinkInputRemoved` is sent for them)
    /// and the adapter forgets its gains.
    case disconnected
    /// A sink input appeared (or existed when the connection became ready).
    case sinkInputAdded(PulseSinkInput)
    /// A sink input changed: volume, mute, cork or properties (including the adapter's own writes).
    case sinkInputChanged(PulseSinkInput)
    /// A sink input went away, by index.
    case sinkInputRemoved(UInt32)
    /// A client appeared, changed its properties, or existed when the connection became ready
    /// (these come before the first `sinkInputAdded`). A ``PulseClaim`` of another client shows here.
    case clientChanged(PulseClient)
    /// A client went away (its connection closed, or the process died), by index.
    case clientRemoved(UInt32)
}

/// Which server answers the PulseAudio protocol. Both speak it; where they behave differently the
/// adapter handles it (README "PipeWire").
public enum PulseServerKind: String, Sendable, Equatable {
    /// PulseAudio itself.
    case pulseAudio
    /// PipeWire's pipewire-pulse (`server_name` "PulseAudio (on PipeWire …)").
    case pipeWire

    /// The kind named by a `pa_server_info.server_name`.
    public init(serverName: String) {
        self = serverName.contains("PipeWire") ? .pipeWire : .pulseAudio
    }
}
