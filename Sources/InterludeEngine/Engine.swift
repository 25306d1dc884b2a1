import Foundation
import Synchronization
import InterludeConfig
import InterludePolicy
import InterludeWire

/// Where a client's events go (the server's connection writer). Must not block.
public typealias EventSink = @Sendable (EngineEvent) -> Void

/// An event for a client, as the engine publishes it: its name and time are fixed now, its data
/// is encoded when first asked for (``wire``), by whoever writes it: the server does that on
/// the connection's queue, not on the engine, which would otherwise spend a fifth of its time
/// during a notification burst encoding `delivered` events (issue 9). Encoded once however many
/// connections write it.
public struct EngineEvent: Sendable {
    /// The event's name (`delivered`, `interruptionBegan`, …).
    public let name: String
    /// When it happened, seconds since the Unix epoch.
    public let time: Double
    /// Whether the event is one part of a removal of many (`notificationRemoved`): it may wait,
    /// beyond `server.maxOutputBytes`, for the peer to read what came before it, where another
    /// event past that bound closes the connection (PROTOCOL.md "Slow readers").
    public let paced: Bool
    private let data: LazyEventData

    init(name: String, time: Double, paced: Bool = false, data: @escaping @Sendable () -> JSONValue) {
        self.name = name
        self.time = time
        self.paced = paced
        self.data = LazyEventData(data)
    }

    /// The event as written to the wire (its data encoded now if not yet).
    public var wire: WireEvent { WireEvent(event: name, data: data.value, time: time) }

    /// The event's line as written (without the newline), encoded on first use and then the same
    /// bytes for every connection that writes it: N watchers cost one encoding, and the parts of a
    /// removal waiting for many peers that do not read are held once (PROTOCOL.md "Slow readers").
    /// nil if it cannot be encoded (never for data the engine makes).
    public var line: Data? { data.line { [name, time] value in try? ServerMessage.event(WireEvent(event: name, data: value, time: time)).encoded() } }
}

/// A number of bytes read from any thread and set by its owner (``Engine/removalAllowance``,
/// ``Engine/listPageBytes``).
public final class SharedByteCount: Sendable {
    private let bytes: Atomic<Int>
    /// An allowance of `bytes`.
    public init(_ bytes: Int) { self.bytes = Atomic(bytes) }
    /// The bytes allowed now.
    public var value: Int { bytes.load(ordering: .relaxed) }
    /// Sets the bytes allowed.
    public func set(_ value: Int) { bytes.store(value, ordering: .relaxed) }
}

/// An event's data made at most once, on first use, from any thread; and its line, encoded at
/// most once.
final class LazyEventData: @unchecked Sendable {
    // `@unchecked Sendable`: every field is only touched under `lock`.
    private let lock = NSLock()
    private var make: (@Sendable () -> JSONValue)?
    private var made: JSONValue?
    /// The line, once encoded (`.some(nil)`: it could not be).
    private var encoded: Data??
    init(_ make: @escaping @Sendable () -> JSONValue) { self.make = make }
    var value: JSONValue {
        lock.lock()
        defer { lock.unlock() }
        return valueLocked
    }
    private var valueLocked: JSONValue {
        if let made { return made }
        let v = make?() ?? .null
        made = v
        make = nil
        return v
    }
    /// The line made by `encode` from the data, the first time; the same bytes afterwards.
    func line(_ encode: (JSONValue) -> Data?) -> Data? {
        lock.lock()
        defer { lock.unlock() }
        if let encoded { return encoded }
        let line = encode(valueLocked)
        encoded = .some(line)
        return line
    }
}

/// The daemon's heart: owns the state, feeds events to the pure policies in order, and carries
/// out their effects through the ports (DESIGN.md "Shape"). The only place where the audio and
/// notification policies meet.
public actor Engine {
    public nonisolated let version: String
    /// Where the engine's jobs run: audio work before notification work (``EngineExecutor``).
    public nonisolated let executor: EngineExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// The config in force; replaced whole by ``reload(config:)``.
    var config: InterludeConfig
    /// The config the daemon started with: what restart-only keys hold (``reload(config:)``).
    let startedWith: InterludeConfig
    var audioConfig: AudioPolicyConfig
    let clock: EngineClock
    let audio: AudioBackend?
    let sounds: SoundPlayer?
    /// Log lines (one decision each), for the daemon's stderr.
    let log: @Sendable (String) -> Void

    var audioState = AudioPolicyState()

    struct Client {
        var id: Int
        var pid: Int32
        var app: String?
        var sink: EventSink
        var subscribed = false
        /// The peer's executable (/proc/PID/exe at accept time), for N3 entitlements bound to a path.
        var executable: String?
        var sessions: [AudioSessionID] = []
        /// The peer as it was when the connection was accepted (N3: checked again by `peerVerifier`).
        var peer: PeerIdentity
    }
    var clients: [Int: Client] = [:]
    var nextClient = 1
    var nextSession = 1
    /// Owner of each explicit session; implicit ones (A10) have none.
    var owner: [AudioSessionID: Int] = [:]
    /// The implicit session of each unmatched stream (A10).
    var implicitSession: [UInt32: AudioSessionID] = [:]
    /// Order in which sessions were last activated (to match a multi-session client's untagged streams).
    var activationSerial: [AudioSessionID: Int] = [:]
    var serial = 0
    /// App-reported playing state, for sessions without matched streams.
    var reportedPlaying: [AudioSessionID: Bool] = [:]
    /// The duck level (dB) last told to each session with `duckChanged`.
    var duckReported: [AudioSessionID: Double] = [:]
    var streams: [UInt32: AudioStream] = [:]
    /// The latest output change of each stream still being carried out (see `apply`).
    var outputChanges: [UInt32: (serial: Int, task: Task<Void, Never>)] = [:]
    var outputSerial = 0
    var audioConnected = false
    /// Wakes the audio policy at its next deadline (A4 delay, A8 grace, A9 expiry).
    var audioTimer = DeadlineTimer()
    // Notification side (N-rules): state, config, store, timer.
    var notifState = NotificationState()
    var notifConfig: NotificationPolicyConfig
    let store: NotificationStoring?
    /// Apps that act for the user (`server.userTools` in `Config/`: the interlude CLI).
    var userTools: Set<String>
    /// Audio sessions one connection and all connections may hold (`server.maxSessionsPerClient`,
    /// `server.maxSessions`); derived from the config at start and on each reload.
    var sessionLimits: (perClient: Int, total: Int)
    /// Wakes the notification policy at its next deadline (triggers, schedules, summary).
    var notificationTimer = DeadlineTimer()
    /// Notification events whose state is being committed, oldest first: their effects and
    /// replies wait for the commit (N15), in order (see `notifyDurably`).
    var awaitingCommit = CommitQueue()
    /// How many per-notification log lines are written during a flood (``logNotice(_:)``).
    /// Nil: every line (`server.logNotificationsPerSecond` 0).
    var noticeBudget: LogLineBudget?
    /// Sums up a flood of notification lines every 10 s (``noticeTick()``).
    var noticeTimer = DeadlineTimer()
    /// Whether the daemon is stopping (``beginStopping()``): no sound starts from then on.
    var stopping = false
    /// Whether a batch of `notification.add`s stops after the decision in hand and commits what it
    /// has (``beginAddNotifications(client:_:whenSettled:)``): when an audio job waits. Tests set their own.
    var notificationBatchPause: @Sendable (EngineExecutor) -> Bool = { $0.audioJobWaiting }
    var generatedIDs = 0
    /// What the latest sound of each notification actually played (S1), for `notification.explain`:
    /// the policy decides the requested sound; whether it could be used is known only once the
    /// sample cache has tried. Kept in memory for the newest ``PlayedSounds/capacity`` notifications.
    var playedSounds = PlayedSounds()
    /// This daemon's identity on the audio server (its socket path), and whether it manages only
    /// streams marked with it (`--private`, the scenario runner's daemon).
    var identity: String?
    var onlyOwnStreams = false
    /// How the daemon re-reads its config (``setReloader(_:)``); nil: `config.reload` fails.
    var reloader: Reloader?
    /// The D-Bus side (Engine+Bus.swift): port, mode, id map.
    var bus = BusBridgeState()
    /// MPRIS players (Engine+Players.swift): port, players by bus name.
    var mpris = PlayerBridgeState()
    /// Checks at each entitlement check that a peer is still the process that connected (N3).
    let peerVerifier: PeerVerifying
    /// The broker side of remote notifications (Engine+Remote.swift); nil without a broker.
    var remote: RemoteSettings?

    /// How many bytes of paced lines (a removal's events and reply) a connection may hold beyond
    /// `server.maxOutputBytes` at the limits in force (``removalAllowanceBytes(_:)``): set at
    /// start and at each reload; the server's connections read it.
    public nonisolated let removalAllowance: SharedByteCount
    /// About how many bytes of entries a page of the center (`notification.delivered`,
    /// `notification.pending`) holds: ``ListNotificationsParams/listPageBytes`` (256 KiB), or a
    /// quarter of `server.maxOutputBytes` when that is smaller (the server sets it). At the smallest
    /// `maxOutputBytes` (64 KiB) a 256 KiB page closed the `interlude center` that asked for it as
    /// a client that does not read (a stranger's find).
    public nonisolated let listPageBytes = SharedByteCount(ListNotificationsParams.listPageBytes)

    /// - Parameters:
    ///   - store: where the notification state persists (N15); nil keeps it in memory only.
    /// - Throws: the store's error when the saved state cannot be read.
    public init(config: InterludeConfig, audio: AudioBackend?, sounds: SoundPlayer?, clock: EngineClock = SystemClock(),
                store: NotificationStoring? = nil, version: String, log: @escaping @Sendable (String) -> Void = { _ in },
                peerVerifier: PeerVerifying = ProcPeerVerifier(), executor: EngineExecutor = .shared) throws {
        self.executor = executor
        self.peerVerifier = peerVerifier
        self.notifConfig = config.notificationPolicy
        self.removalAllowance = SharedByteCount(Self.removalAllowanceBytes(config.notificationPolicy))
        self.userTools = Set(config.strings("server.userTools"))
        self.sessionLimits = Self.sessionLimits(config)
        self.noticeBudget = Self.noticeLineBudget(config)
        self.store = store
        if let store { notifState = try store.load() }
        self.config = config
        self.startedWith = config
        self.audioConfig = config.audioPolicy
        self.audio = audio
        self.sounds = sounds
        self.clock = clock
        self.version = version
        self.log = log
    }

    /// Names this daemon on the audio server: streams whose `interlude.daemon` property names
    /// another daemon are left alone; with `onlyOwn`, so are unmarked streams (a private daemon on
    /// a shared server must not duck the user's audio).
    public func setIdentity(_ identity: String, onlyOwnStreams onlyOwn: Bool) {
        self.identity = identity
        self.onlyOwnStreams = onlyOwn
    }

    /// Whether the daemon manages a stream (see ``setIdentity(_:onlyOwnStreams:)``).
    func manages(_ s: AudioStream) -> Bool {
        if let tag = s.daemonTag { return identity == nil || tag == identity }
        return !onlyOwnStreams
    }

    /// Starts consuming the audio backend's events and the notification timers. Returns at once.
    /// After a restart, apps count as disconnected, the ringer switch is where it was (it is
    /// saved with the notification state, A12), triggers missed while the daemon was down are
    /// delivered once, marked late (N15), and N11's limits, if lowered while it was down, apply.
    public func start() {
        for (app, record) in notifState.apps where record.connected { _ = try? notify(.appDisconnected(app: app)) }
        if notifState.ringerSilent != audioState.ringerSilent {
            log("ringer silent, as it was before the restart [A12]")
            reduce(.ringer(silent: notifState.ringerSilent))
        }
        // Time passed while the daemon was down (N15), and limits lowered since apply now (N11).
        applyLimitsNow()
        guard let audio else { return }
        let events = audio.events
        // The audio server's stream events take the audio lane. The stream is read on Swift's
        // pool (a detached task), not on the engine: the engine's executor runs a job on the
        // thread that enqueues it, which must not be the audio server's (EngineExecutor).
        Task.detached(priority: EngineExecutor.audioLanePriority) { [weak self] in
            for await e in events { await self?.handle(e) }
        }
    }

    // MARK: Clients

    /// A new connection from process `pid`. Returns its client number.
    public func connect(pid: Int32, executable: String? = nil, sink: @escaping EventSink) -> Int {
        connect(peer: PeerIdentity(pid: pid, executable: executable), sink: sink)
    }

    /// A new connection whose peer is `peer`, read when the connection was accepted
    /// (``PeerIdentity/read(pid:fd:)``). Returns its client number.
    public func connect(peer: PeerIdentity, sink: @escaping EventSink) -> Int {
        let id = nextClient
        nextClient += 1
        clients[id] = Client(id: id, pid: peer.pid, sink: sink, executable: peer.executable, peer: peer)
        return id
    }

    /// The executable path to judge an N3 entitlement by, for a request of `level` from `client`:
    /// the one read when the connection was accepted, if the peer is still that process and runs
    /// that code (``PeerVerifying``); else nil and why. Checked only when it matters: a critical
    /// request from an app whose entitlement is bound to an executable.
    func entitlementPeer(client: Int, app: String, level: InterruptionLevel) -> (path: String?, problem: String?) {
        guard let c = clients[client] else { return (nil, nil) }
        guard level == .critical,
              notifConfig.entitledCriticalApps.contains(where: { $0.app == app && $0.executablePath != nil }) else {
            return (c.executable, nil)
        }
        if let problem = peerVerifier.problem(with: c.peer) {
            log("\(app) (pid \(c.pid)) asks for a critical alert, not entitled: \(problem) [N3]")
            return (nil, problem)
        }
        return (c.executable, nil)
    }

    /// An app id is 1…255 bytes of UTF-8 without whitespace or control characters
    /// (reverse-DNS by convention, e.g. `org.example.Music`).
    /// - Throws: `badRequest` naming the rule.
    static func checkAppID(_ app: String, param: String = "app") throws(WireError) {
        if AppIdentifier.problem(app) != nil {
            throw WireError(.badRequest, "\(param) must be 1…255 bytes of UTF-8 without spaces or control characters, e.g. org.example.Music")
        }
    }

    /// `hello`: names the client's app.
    public func hello(client: Int, app: String) throws(WireError) -> HelloResult {
        if let named = clients[client]?.app, named != app {
            throw WireError(.badRequest, "this connection is \(named); an app id is given once (connect again for another)")
        }
        try Engine.checkAppID(app)
        clients[client]?.app = app
        _ = try? notify(.appConnected(app: app))  // presence only; a failed save is logged
        return HelloResult(client: client, pid: clients[client]?.pid ?? 0)
    }

    /// A9: the connection closed (or the client crashed): its sessions deactivate, notifying others.
    public func disconnect(client: Int) {
        guard let c = clients.removeValue(forKey: client) else { return }
        if let app = c.app, !clients.values.contains(where: { $0.app == app }) { _ = try? notify(.appDisconnected(app: app)) }
        if !c.sessions.isEmpty {
            let named = c.sessions.prefix(8).map(\.rawValue).joined(separator: ", ")
            let more = c.sessions.count > 8 ? " and \(c.sessions.count - 8) more" : ""
            log("client \(client) (\(c.app ?? "?")) gone: releasing \(named)\(more) [A9]")
            reduce(.clientGone(c.sessions))
            for s in c.sessions { owner[s] = nil; activationSerial[s] = nil; reportedPlaying[s] = nil; duckReported[s] = nil }
        }
    }

    /// `subscribe`: the client also receives events it did not cause: a user's tool
    /// (`server.userTools`) every event, an app those about itself and the user's global switches
    /// (ringer, focus); never another app's (``EventAudience``, issue 7).
    public func subscribe(client: Int) { clients[client]?.subscribed = true }

    // MARK: Audio sessions

    /// `server.maxSessionsPerClient` and `server.maxSessions` of `config`.
    static func sessionLimits(_ config: InterludeConfig) -> (perClient: Int, total: Int) {
        (Int(config.number("server.maxSessionsPerClient")), Int(config.number("server.maxSessions")))
    }

    /// `session.register`.
    public func register(client: Int, _ p: RegisterParams) throws(WireError) -> RegisterResult {
        guard let c = clients[client], let app = c.app else { throw WireError(.helloRequired, "say hello first") }
        let options = Set(p.options ?? [])
        let descriptor = AudioSessionDescriptor(app: app, category: p.category ?? .soloAmbient, mode: p.mode ?? .default, options: options)
        if let why = descriptor.configurationProblem { throw WireError(.badRequest, why) }
        let (perClient, total) = sessionLimits
        guard c.sessions.count < perClient else {
            throw WireError(.limitReached, "this connection holds \(c.sessions.count) audio sessions; at most \(perClient) (server.maxSessionsPerClient)")
        }
        guard owner.count < total else {
            throw WireError(.limitReached, "\(owner.count) audio sessions are registered; at most \(total) (server.maxSessions)")
        }
        let id = AudioSessionID("s\(nextSession)")
        nextSession += 1
        owner[id] = client
        clients[client]?.sessions.append(id)
        reduce(.register(id, descriptor))
        log("\(id) registered by \(app): \(descriptor.category.rawValue)/\(descriptor.mode.rawValue) \(options.map(\.rawValue).sorted())")
        refreshPlaying(id)
        return RegisterResult(session: id)
    }

    func ownedSession(_ client: Int, _ id: AudioSessionID) throws(WireError) -> AudioSessionID {
        guard owner[id] == client, audioState.sessions[id] != nil else {
            throw WireError(.notFound, "no session \(id.rawValue.isEmpty ? "\"\"" : id.rawValue) on this connection")
        }
        return id
    }

    /// `session.activate`. For a `duckOthers` session the reply comes once the duck ramps have
    /// finished (A11).
    public func activate(client: Int, _ p: ActivateParams) async throws(WireError) -> ActivateResult {
        let id = try ownedSession(client, p.session)
        serial += 1
        activationSerial[id] = serial
        let (fx, ramps) = reduce(.activate(id, acceptsDelay: p.acceptsDelay ?? false))
        guard let result = fx.lazy.compactMap({ e -> ActivationResult? in
            if case let .activationResult(s, r) = e, s == id { return r } else { return nil }
        }).first else { throw WireError(.internalError, "no activation result") }
        switch result {
        case let .activated(style, ducked):
            // A11: a ducking session's reply waits for the ducks its activation started. Others
            // (a call, say) are answered at once; their ramps run on.
            if audioState.sessions[id]?.descriptor.ducksOthers == true {
                for r in ramps { await r.value }
            }
            return ActivateResult(state: .active, promptStyle: style, ducked: ducked)
        case .delayed:
            return ActivateResult(state: .delayed, promptStyle: nil, ducked: false)
        case .failed(.insufficientPriority):
            throw WireError(.insufficientPriority, "a call is active; activate with acceptsDelay to wait for it (A4)")
        case .failed(.notFound):
            throw WireError(.notFound, "no session \(id.rawValue)")
        }
    }

    /// `session.deactivate`.
    public func deactivate(client: Int, _ p: DeactivateParams) throws(WireError) {
        let id = try ownedSession(client, p.session)
        let notifyOthers = p.notifyOthers ?? true
        // Said as the activation is (a stranger read the log and found only the activations).
        if let state = audioState.sessions[id]?.state, state != .inactive {
            log("\(id) deactivate (\(state.rawValue)) notifyOthers=\(notifyOthers) [A5]")
        }
        reduce(.deactivate(id, notifyOthers: notifyOthers))
    }

    /// `session.setPlaying`.
    public func setPlaying(client: Int, _ p: SetPlayingParams) throws(WireError) {
        let id = try ownedSession(client, p.session)
        reportedPlaying[id] = p.playing
        refreshPlaying(id)
    }

    /// A12: the ringer switch (also silences notification sounds but critical ones, N3). It is the
    /// user's switch, like focus and settings: only the user's tools (`server.userTools`) may set it.
    /// - Throws: `notAuthorized` for any other app; `storageFailed` when the switch cannot be
    ///   saved (N15); nothing changes then.
    public func setRinger(client: Int, silent: Bool) async throws(WireError) {
        guard let app = clients[client]?.app else { throw WireError(.helloRequired, "say hello first") }
        guard actsForUser(app) else {
            throw WireError(.notAuthorized, "the ringer belongs to the user: use the interlude CLI (ringer silent|ring) [A12]")
        }
        try await notifyDurably(.setRinger(silent: silent))
        log("ringer \(silent ? "silent" : "ring") [A12]")
        reduce(.ringer(silent: silent))
        publish(WireEventName.ringerChanged, .object(["mode": .string(silent ? "silent" : "ring")]), to: .subscribers)
    }

    /// A decided playback that could not play: nobody heard it, so it is no audible alert of its
    /// app and starts no cooldown of its thread (N11, the core's `soundNotPlayed`). For both play
    /// paths: `sound.play` and a notification's sound.
    func soundNotHeard(_ playback: NotificationSoundPlayback) {
        guard playback.decidedAt != nil else { return }
        _ = try? notify(.soundNotPlayed(playback))
    }

    /// `sound.play`.
    public func playSound(client: Int, _ p: SoundPlayParams) async throws(WireError) -> SoundPlayResult {
        guard let sounds else { throw WireError(.audioUnavailable, "no sound player") }
        // The same for every caller, the user's tools included (the N17 path checks it for apps).
        guard !p.sound.isEmpty else { throw WireError(.badRequest, "sound.play: param \"sound\" must be a sound name or a path, not empty") }
        var volume = p.volume ?? 1
        guard (0...1).contains(volume) else { throw WireError(.badRequest, "sound.play: param \"volume\" must be within 0…1") }
        var decided: NotificationSoundPlayback?   // what N17's rules let an app play
        let app = clients[client]?.app ?? "?"
        if !actsForUser(app) {
            // N17: an app's standalone sound obeys the same focus, ringer and rate rules, at the
            // volume they decide (cooldown, N11).
            let request = NotificationPlayRequest(sound: p.sound, volume: volume)
            let peer = entitlementPeer(client: client, app: app, level: request.interruptionLevel)
            let reply = try expect(await notifyDurably(.play(request, app: app, peerExecutablePath: peer.path, peerProblem: peer.problem)))
            guard case let .played(decision, playback) = reply else { throw WireError(.internalError, "unexpected reply") }
            guard let playback, playback.volume > 0 else {
                return SoundPlayResult(played: "none", warning: WireError(.silenced, "no sound: rules \(decision.rules.joined(separator: ", "))"),
                                       duration: 0)
            }
            volume = playback.volume
            decided = playback
        }
        var props = ["application.id": app]
        if let identity { props["interlude.daemon"] = identity }
        let result: SoundPlayResult
        do { result = try await sounds.play(p.sound, volume: volume, properties: props) } catch {
            if let decided { soundNotHeard(decided) }
            throw error
        }
        if let w = result.warning { log("sound \(p.sound) for \(app): \(w) → played \(result.played) [S1]") }
        let played = JSONValue.object([
            "app": .string(app), "requested": .string(p.sound), "played": .string(result.played),
            "volume": .number(volume), "duration": .number(result.duration),
        ])
        publish(WireEventName.soundPlayed, played, to: .app(app))
        return result
    }

    // MARK: Status

    /// `status`: sessions, their state and duck level, streams matched. The sessions listed are
    /// bounded (``StatusResult/maxSessionsListed``, and ``listPageBytes`` of JSON), those doing
    /// something first; `sessionsOmitted` counts the rest.
    public func status() async -> StatusResult {
        var byStream: [AudioSessionID: [StreamStatus]] = [:]
        var unmatched: [StreamStatus] = []
        for s in streams.values.sorted(by: { $0.index < $1.index }) {
            let st = StreamStatus(index: s.index, pid: s.pid, role: s.role, corked: s.corked, muted: s.muted,
                                  userVolumeDb: s.userVolumeDb, gainDb: s.gainDb)
            if let id = session(for: s) { byStream[id, default: []].append(st) } else { unmatched.append(st) }
        }
        // Bounded (``StatusResult/maxSessionsListed`` sessions, and ``listPageBytes`` of them as
        // JSON, at least one): those doing something first, then by id; listed by id. At the
        // smallest `server.maxOutputBytes` (64 KiB) 256 sessions of long app ids passed the bound,
        // and `interlude status` was closed as a client that does not read.
        func byID(_ a: AudioSessionID, _ b: AudioSessionID) -> Bool {
            a.rawValue.count != b.rawValue.count ? a.rawValue.count < b.rawValue.count : a < b
        }
        func idle(_ s: AudioSession) -> Bool {
            s.state == .inactive && !s.isPlaying && byStream[s.id] == nil && audioState.applied[s.id] == nil
        }
        let all = Array(audioState.sessions.values)
        // The first `maxSessionsListed` in that order, picked without sorting all of them (with
        // 3,000 sessions in a pile, sorting them and each one's interrupters took 73 ms, on the engine).
        let limit = StatusResult.maxSessionsListed
        var ordered = firstInOrder(limit, of: all.lazy.filter { !idle($0) }) { byID($0.id, $1.id) }
        if ordered.count < limit { ordered += firstInOrder(limit - ordered.count, of: all.lazy.filter(idle)) { byID($0.id, $1.id) } }
        let budget = listPageBytes.value
        let listed = Self.fitting(ordered.map { s -> SessionStatus in
            let out = audioState.applied[s.id] ?? .unity
            let streams = byStream[s.id] ?? []
            let interrupters = audioState.interrupterSummary(of: s.id, first: StatusResult.maxListedPerSession)
            var entry = SessionStatus(session: s.id, app: s.descriptor.app, client: owner[s.id], category: s.descriptor.category,
                                      mode: s.descriptor.mode, options: s.descriptor.options.sorted(), implicit: s.descriptor.implicit,
                                      state: s.state, playing: s.isPlaying, ducked: out.ducked, duckDb: out.gainDb, muted: out.muted,
                                      interruptedBy: interrupters.first,
                                      streams: Array(streams.prefix(StatusResult.maxListedPerSession)))
            entry.streamsOmitted = Self.omitted(streams.count, listed: entry.streams.count)
            entry.interruptedByOmitted = Self.omitted(interrupters.count, listed: entry.interruptedBy.count)
            return entry
        }, budget: budget)
        let sessions = listed.sorted { byID($0.session, $1.session) }
        // The streams no session owns and the players, in their order, each up to a page too.
        let streamsListed = Self.fitting(unmatched, budget: budget)
        let server = audioConnected ? await audio?.serverName() : nil
        var result = StatusResult(version: version, audioConnected: audioConnected, audioServer: server,
                                  ringer: audioState.ringerSilent ? "silent" : "ring", sessions: sessions,
                                  unmatchedStreams: streamsListed, samples: await sounds?.cachedSamples() ?? [])
        result.sessionsOmitted = Self.omitted(all.count, listed: listed.count)
        result.unmatchedStreamsOmitted = Self.omitted(unmatched.count, listed: streamsListed.count)
        if audioConnected { result.soundsUnavailable = await sounds?.unavailableReason() }
        result.configFiles = config.files
        result.bus = bus.status
        if let players = playerStatuses() {
            let playersListed = Self.fitting(players, budget: budget)
            result.players = playersListed
            result.playersOmitted = Self.omitted(players.count, listed: playersListed.count)
        }
        return result
    }

    /// How many of `count` entries a bounded list leaves out; nil when none (the `…Omitted` fields).
    static func omitted(_ count: Int, listed: Int) -> Int? { count > listed ? count - listed : nil }

    /// The first of `items` whose JSON (a line each) fits in `budget` bytes, at least one: a list
    /// in a reply that must stay under `server.maxOutputBytes` (``listPageBytes``).
    static func fitting<T: Encodable>(_ items: [T], budget: Int) -> [T] {
        var bytes = 0
        var kept = 0
        for item in items {
            let size = WireCoding.encodedSize(of: item) + 1
            if kept > 0 && bytes + size > budget { break }
            bytes += size
            kept += 1
        }
        return Array(items.prefix(kept))
    }

    // MARK: Policy plumbing

    /// Feeds one event to the audio policy and carries out its effects. Returns the effects and
    /// the ramps it started (for A11).
    @discardableResult
    func reduce(_ event: AudioPolicyEvent) -> ([AudioPolicyEffect], [Task<Void, Never>]) {
        let fx = AudioPolicy.reduce(&audioState, event, now: clock.now, config: audioConfig)
        var ramps: [Task<Void, Never>] = []
        for e in fx { ramps += carryOut(e) }
        scheduleTick()
        // A call in progress silences notification sounds but critical ones (N-rules, A4).
        let callActive = !audioState.activeCalls.isEmpty
        if callActive != notifState.callActive { _ = try? notify(.setCallActive(callActive)) }
        return (fx, ramps)
    }

    func carryOut(_ e: AudioPolicyEffect) -> [Task<Void, Never>] {
        switch e {
        case .activationResult(let id, let r):
            switch r {
            case let .activated(style, ducked):
                log("\(id) activate → active" + (style.map { ", promptStyle \($0.rawValue)" } ?? "") + (ducked ? ", ducked" : "") + " [A1, A4]")
            case .delayed: log("\(id) activate → delayed until the call ends [A4]")
            case let .failed(code): log("\(id) activate → failed: \(code.rawValue) [A4]")
            }
        case let .interruptionBegan(id, reason):
            log("\(id) interruptionBegan reason=\(reason.rawValue)")
            logPlayerDecision(id)
            send(to: id, WireEventName.interruptionBegan, InterruptionBeganData(session: id, reason: reason))
        case let .interruptionEnded(id, shouldResume):
            log("\(id) interruptionEnded shouldResume=\(shouldResume) [A5]")
            logPlayerDecision(id)
            send(to: id, WireEventName.interruptionEnded, InterruptionEndedData(session: id, shouldResume: shouldResume))
        case let .delayedActivationCompleted(id, style):
            log("\(id) delayed activation completed [A4]")
            send(to: id, WireEventName.activated, SessionEventData(session: id, promptStyle: style))
        case let .expired(id):
            log("\(id) expired: no running stream for \(audioConfig.transientExpiry) s [A9]")
            send(to: id, WireEventName.expired, SessionEventData(session: id))
        case let .enforcementChanged(id, muted):
            log("\(id) \(muted ? "muted: \(muteReason(id))" : "unmuted") [A8]")
            send(to: id, WireEventName.enforcement, SessionEventData(session: id, muted: muted))
        case .pausePlayer, .resumePlayer:
            carryOutPlayer(e)
        case let .setOutput(id, out, ramp):
            log("\(id) output gain=\(out.gainDb) dB muted=\(out.muted) ramp=\(Int(ramp * 1000)) ms")
            // duckChanged only when the duck changed (a mute alone, A8 or A12, has events of its own).
            if (duckReported[id] ?? 0) != out.gainDb {
                duckReported[id] = out.gainDb
                send(to: id, WireEventName.duckChanged, DuckChangedData(session: id, ducked: out.ducked, levelDb: out.gainDb))
            }
            return streams.values.filter { session(for: $0) == id }.map { apply(out, to: $0.index, ramp: ramp) }
        }
        return []
    }

    /// The daemon is stopping (SIGTERM): the requests being decided still finish and are
    /// answered, but no notification sound starts from now on (it would outlive the daemon).
    public func beginStopping() {
        stopping = true
        finishNoticeFlood(" (stopping)")
    }

    /// Puts every stream the daemon changed back as the user had it: gain 0 dB and unmuted, at
    /// once, and waits for it. Called when the daemon stops, so that no duck (A2) or mute (A8,
    /// A12) outlives it: a duck is only ever a limit on top of the user's volume (A7).
    /// A stream whose change is still being carried out counts too: the stop closes the
    /// connections first, so a prompt's release has just started its ramp back up (its applied
    /// output is unity already) and exiting would cut that ramp short, the stream left ducked.
    public func releaseStreams() async {
        let changed = streams.values.filter { s in
            outputChanges[s.index] != nil || (session(for: s).flatMap { audioState.applied[$0] }.map { $0 != .unity } ?? false)
        }
        log("stopping: restoring \(changed.count) stream(s) to the user's volume")
        for s in changed { await apply(.unity, to: s.index, ramp: 0).value }
    }

    /// Applies a session output to one stream: mute at once, gain ramped. Changes to one stream
    /// are carried out in the order they were decided: a newer change cancels the one before it
    /// (a ramp stops where it got to, A2) and starts once that one has returned, so a slow server
    /// call of an older change can never land after a newer one (a duck's unmute after A12's mute).
    /// The task ends when the change is done, or early when a newer change superseded it (A11).
    func apply(_ out: SessionOutput, to stream: UInt32, ramp: Double) -> Task<Void, Never> {
        let audio = self.audio
        let previous = outputChanges[stream]
        previous?.task.cancel()
        outputSerial += 1
        let serial = outputSerial
        let task = Task(priority: EngineExecutor.audioLanePriority) {
            await previous?.task.value
            if let audio, !Task.isCancelled {
                await audio.setMute(stream: stream, out.muted)
                if !Task.isCancelled { await audio.rampGain(stream: stream, toDb: out.gainDb, duration: ramp) }
            }
            if self.outputChanges[stream]?.serial == serial { self.outputChanges[stream] = nil }
        }
        outputChanges[stream] = (serial, task)
        return task
    }

    func scheduleTick() {
        audioTimer.arm(AudioPolicy.nextDeadline(audioState, config: audioConfig), clock: clock,
                       priority: EngineExecutor.audioLanePriority) { [weak self] in await self?.tick() }
    }

    func tick() {
        audioTimer.fired()
        reduce(.tick)
    }

    /// A session's event: to the connection that owns it, and to the subscribed connections of
    /// its app and the user's tools (an implicit session, A10, has neither: the user's tools only).
    func send<T: Encodable & Sendable>(to id: AudioSessionID, _ name: String, _ data: T) {
        let ownerID = owner[id]
        let app = ownerID.flatMap { clients[$0]?.app }
        publish(name, (try? JSONValue(encoding: data)) ?? .null, to: EventAudience(app: app, client: ownerID))
    }

    /// Sends an event to the connections of `audience` (see ``EventAudience``): never to an app
    /// the event is not about (issue 7: an app must not learn another app's data). `data` is
    /// evaluated only if a connection receives the event, and then off the engine, by the first
    /// writer (``EngineEvent``): it must capture values, not the engine's state.
    func publish(_ name: String, _ data: @autoclosure @escaping @Sendable () -> JSONValue, to audience: EventAudience,
                 paced: Bool = false) {
        var event: EngineEvent?
        for c in clients.values where receives(c, audience) {
            if event == nil { event = EngineEvent(name: name, time: clock.wallTime, paced: paced, data: data) }
            c.sink(event!)
        }
    }

    func receives(_ c: Client, _ a: EventAudience) -> Bool {
        if let id = a.client, c.id == id { return true }
        if a.app != nil, c.app == a.app, a.appAlways || c.subscribed { return true }
        guard c.subscribed else { return false }
        return a.everySubscriber || (a.user && c.app.map(actsForUser) == true)
    }

    // MARK: Streams (matching, A10)

    /// The session a stream belongs to: the explicit tag, else the newest-activated session of a
    /// client with the stream's pid, else its implicit session (A10).
    func session(for s: AudioStream) -> AudioSessionID? {
        if let tag = s.sessionTag, audioState.sessions[AudioSessionID(tag)] != nil { return AudioSessionID(tag) }
        if let pid = s.pid {
            let candidates = clients.values.filter { $0.pid == pid }.flatMap(\.sessions)
            if let best = candidates.max(by: { (activationSerial[$0] ?? 0, $0.rawValue) < (activationSerial[$1] ?? 0, $1.rawValue) }) {
                return best
            }
            // An MPRIS player's streams belong to its session (one app, one session; issue 10).
            if let player = playerSession(pid: pid) { return player }
        }
        if let player = playerSession(desktopEntryOf: s) { return player }
        return implicitSession[s.index]
    }

    func handle(_ e: AudioBackendEvent) {
        switch e {
        case .connected:
            audioConnected = true
            log("audio server connected")
            Task { await sounds?.serverRestarted() }
        case .disconnected:
            audioConnected = false
            log("audio server gone; reconnecting")
            // Streams vanished with the server; implicit sessions go with them.
            for index in streams.keys.sorted() { streamRemoved(index) }
        case let .streamAdded(s):
            guard manages(s) else { return }
            streams[s.index] = s
            streamAppeared(s)
        case let .streamChanged(s):
            guard manages(s) else { return }
            let old = streams[s.index]
            streams[s.index] = s
            if old == nil { streamAppeared(s) } else if let id = session(for: s), old?.corked != s.corked { refreshPlaying(id) }
        case let .streamRemoved(index):
            streamRemoved(index)
        }
    }

    func streamAppeared(_ s: AudioStream) {
        if session(for: s) == nil {
            // A10: an unmodified client gets an implicit session from its media.role; a critical
            // alert's sound (N3) gets none.
            let app = s.appName ?? "pid \(s.pid.map(String.init) ?? "?")"
            guard let d = AudioSessionDescriptor.implicit(role: s.role, app: app, criticalAlert: s.critical) else { return }
            let id = AudioSessionID("i\(s.index)")
            implicitSession[s.index] = id
            log("stream \(s.index) (\(d.app), role \(s.role ?? "none")) → implicit \(id) \(d.category.rawValue)/\(d.mode.rawValue) \(d.options.map(\.rawValue).sorted()) [A10]")
            reduce(.register(id, d))
            reduce(.playing(id, !s.corked))
            reduce(.activate(id, acceptsDelay: false))
        } else if let id = session(for: s) {
            refreshPlaying(id)
            playerStreamSeen(s, id)
        }
        // A7: a stream of a ducked (or muted) session starts with that output.
        if let id = session(for: s), let out = audioState.applied[id], out != .unity {
            _ = apply(out, to: s.index, ramp: 0)
        }
    }

    func streamRemoved(_ index: UInt32) {
        guard let s = streams.removeValue(forKey: index) else { return }
        if let id = implicitSession.removeValue(forKey: index) {
            duckReported[id] = nil
            reduce(.unregister(id, notifyOthers: true))
        } else if let id = session(for: s) {
            refreshPlaying(id)
        }
    }

    /// Recomputes whether a session is playing: any matched stream running (uncorked), or, with no
    /// matched stream, what the app reported.
    func refreshPlaying(_ id: AudioSessionID) {
        // A player's playing state is its PlaybackStatus (Engine+Players.swift), not its streams'.
        guard audioState.sessions[id]?.player == nil else { return }
        let mine = streams.values.filter { session(for: $0) == id }
        let playing = mine.isEmpty ? (reportedPlaying[id] ?? false) : mine.contains { !$0.corked }
        if audioState.sessions[id]?.isPlaying != playing { reduce(.playing(id, playing)) }
    }
}
