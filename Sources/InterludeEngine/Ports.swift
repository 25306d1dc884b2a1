import InterludePolicy
import InterludeWire

/// A playback stream of the audio server (a PulseAudio sink input), as the engine sees it.
public struct AudioStream: Sendable, Equatable {
    public var index: UInt32
    /// `application.process.id` of the stream or its client.
    public var pid: Int32?
    /// The stream property `interlude.session` set by our client library (explicit session match).
    public var sessionTag: String?
    /// `media.role` (A10).
    public var role: String?
    /// The stream property `interlude.daemon`: the socket of the daemon that owns the stream's
    /// session. A daemon leaves alone streams marked for another daemon on the same audio server.
    public var daemonTag: String?
    /// A critical alert played by the daemon (stream property `interlude.critical`, N3).
    public var critical: Bool
    public var appName: String?
    /// Who the stream says its app is besides its pid, lowercased, most specific first: a flatpak's
    /// app id (`pipewire.access.portal.app_id`), `application.id`, `application.process.binary`.
    /// An MPRIS player whose `DesktopEntry` is one of them owns the stream when no pid matches (a
    /// browser plays from another process than the one on the bus; issue 10).
    public var appIdentifiers: [String]
    /// Paused by its app.
    public var corked: Bool
    public var muted: Bool
    /// The user's volume (dB) and the gain the daemon applies on top (dB), A7.
    public var userVolumeDb: Double
    public var gainDb: Double

    /// Most UTF-8 bytes kept of `role` and `appName` (what `status`, the log and an implicit
    /// session's app show), as many as an app id may have: any client of the audio server sets
    /// them, and one stream with a 20 KB `media.role` made every `status` reply pass
    /// `server.maxOutputBytes` (a stranger's find).
    public static let maxTextBytes = AppIdentifier.maximumBytes

    /// A stream as reported; `role` and `appName` are cut to ``maxTextBytes`` on a character
    /// boundary (no role the rules know is that long, A10).
    public init(index: UInt32, pid: Int32? = nil, sessionTag: String? = nil, role: String? = nil, appName: String? = nil,
                corked: Bool = false, muted: Bool = false, userVolumeDb: Double = 0, gainDb: Double = 0,
                daemonTag: String? = nil, critical: Bool = false, appIdentifiers: [String] = []) {
        self.daemonTag = daemonTag
        self.appIdentifiers = appIdentifiers
        self.critical = critical
        self.index = index; self.pid = pid; self.sessionTag = sessionTag
        self.role = role?.prefix(utf8Bytes: Self.maxTextBytes); self.appName = appName?.prefix(utf8Bytes: Self.maxTextBytes)
        self.corked = corked; self.muted = muted; self.userVolumeDb = userVolumeDb; self.gainDb = gainDb
    }
}

/// What the audio server reports.
public enum AudioBackendEvent: Sendable, Equatable {
    /// Connected (also after a reconnect: the engine re-applies every output).
    case connected
    case disconnected
    case streamAdded(AudioStream)
    case streamChanged(AudioStream)
    case streamRemoved(UInt32)
}

/// Port: the audio server (implemented by the PulseAudio adapter; a fake in tests).
public protocol AudioBackend: Sendable {
    /// Stream changes, in order. Consumed by one engine.
    var events: AsyncStream<AudioBackendEvent> { get }
    /// Ramps the gain on top of the stream's user volume to `gainDb` over `duration` seconds (A2,
    /// A7) and returns when the ramp is done or superseded. Errors (stream gone) are swallowed.
    func rampGain(stream: UInt32, toDb gainDb: Double, duration: Double) async
    /// Mutes or unmutes the stream (A8, A12).
    func setMute(stream: UInt32, _ muted: Bool) async
    /// Whether the output (default sink) is muted; nil when unknown (N3).
    func outputMuted() async -> Bool?
    /// Mutes or unmutes the output (default sink), for a critical sound through a muted output (N3).
    func setOutputMuted(_ muted: Bool) async
    /// The audio server as it names itself (e.g. "pulseaudio", or "PulseAudio (on PipeWire 0.3.65)");
    /// nil while not connected. Shown by `status`.
    func serverName() async -> String?
}

/// Port: persistence of the notification state (N15). `save` must be atomic: a crash leaves the
/// old or the new state, never a mix.
///
/// The engine calls `submit`, which returns at once: a store with a group commit (the SQLite
/// adapter) writes the change off the engine's actor, together with the others that arrive while
/// a commit is in flight, and the engine acknowledges the request when ``NotificationCommit/outcome()``
/// says it is durable. A simple store (the default `submit`) saves at once.
public protocol NotificationStoring: Sendable {
    /// The saved state (the last durable one).
    func load() throws -> NotificationState
    /// Saves `state` before returning (atomic).
    func save(_ state: NotificationState) throws
    /// Hands `state`, the next state of the engine, to the store and returns without waiting for
    /// the disk. States are written in the order they are submitted. Default: `save` now.
    func submit(_ state: NotificationState) -> NotificationCommit
    /// After a commit failed: the state that is durable, which the engine takes as its own (every
    /// submit after the failed one failed too); nil if there is nothing to take (the failure was
    /// already reported by an earlier call, or the store is a simple one whose failed `save`
    /// changed nothing). Default: nil.
    func recoverAfterFailedCommit() -> NotificationState?
}

extension NotificationStoring {
    public func submit(_ state: NotificationState) -> NotificationCommit {
        do {
            try save(state)
            return .durable
        } catch {
            return .failed(error)
        }
    }

    public func recoverAfterFailedCommit() -> NotificationState? { nil }
}

/// The outcome of one `NotificationStoring.submit`: known at once (a simple store), or after the
/// commit it went into (a group commit).
public struct NotificationCommit: Sendable {
    /// The error if known now to have failed, `.some(nil)` if known durable, nil if still in flight.
    public let known: (any Error)??
    private let tracker: (any NotificationCommitTracking)?

    /// Durable already.
    public static let durable = NotificationCommit(known: .some(nil), tracker: nil)
    /// Failed already (nothing was written).
    public static func failed(_ error: any Error) -> NotificationCommit { NotificationCommit(known: .some(error), tracker: nil) }

    /// A commit in flight that `tracker` reports on: it answers ``settledNow()`` without waiting
    /// and calls ``whenSettled(_:)``'s body on the thread that finished the commit.
    public init(tracker: any NotificationCommitTracking) {
        self.init(known: nil, tracker: tracker)
    }

    private init(known: (any Error)??, tracker: (any NotificationCommitTracking)?) {
        self.known = known
        self.tracker = tracker
    }

    /// Waits until the state is durable (nil) or its commit failed (the error).
    nonisolated(nonsending) public func outcome() async -> (any Error)? {
        if let now = settledNow() { return now }
        return await withCheckedContinuation { (c: CheckedContinuation<(any Error)?, Never>) in
            whenSettled { c.resume(returning: $0) }
        }
    }

    /// The outcome if it is known now (`.some(nil)`: durable, `.some(error)`: failed), without
    /// waiting; nil while the commit is in flight.
    public func settledNow() -> (any Error)?? {
        known ?? tracker?.settledNow()
    }

    /// Calls `body` with the outcome once it is known: at once on this thread if it is known now,
    /// else on the thread that finished the commit, so a caller can hop onto its actor from there
    /// without a thread of Swift's pool in between (an awaited continuation always resumes on the
    /// pool first: one more thread wake-up per commit; issue 9). `body` must not block.
    public func whenSettled(_ body: @escaping @Sendable ((any Error)?) -> Void) {
        if let known { return body(known) }
        tracker?.whenSettled(body)
    }
}

/// How a store with commits in flight reports one of them (``NotificationCommit/init(tracker:)``).
public protocol NotificationCommitTracking: Sendable {
    /// `.some(nil)` if durable, `.some(error)` if failed, nil while in flight.
    func settledNow() -> (any Error)??
    /// Calls `body` once with the outcome: at once if known, else on the committing thread, once
    /// `settledNow()` says it (the engine asks again from `body`).
    func whenSettled(_ body: @escaping @Sendable ((any Error)?) -> Void)
}

/// Port: plays notification sounds through the sample cache (S1–S3).
public protocol SoundPlayer: Sendable {
    /// Resolves (S2), decodes and caches (S1, S3) and plays a sound; falls back to the default sound
    /// with a warning when the requested one cannot be used (S1).
    /// - Parameters:
    ///   - volume: linear amplitude 0…1.
    /// - Throws: ``WireError`` `soundFailed` when not even the default can play, `audioUnavailable`
    ///   when the server is away.
    func play(_ nameOrPath: String, volume: Double, properties: [String: String]) async throws(WireError) -> SoundPlayResult
    /// Names of the samples in the server's sample cache that the player uploaded.
    func cachedSamples() async -> [String]
    /// Forgets uploads after the server restarted, so they are uploaded again on demand.
    func serverRestarted() async
    /// Why sounds fail now without asking the server (it did not answer and is left alone), or
    /// nil; answered at once, without waiting for a play or upload under way (for `status`).
    func unavailableReason() async -> String?
}

extension SoundPlayer {
    /// A player that never stops asking its server: nil.
    public func unavailableReason() async -> String? { nil }
}

/// Port: time. `now` is monotonic seconds (for the audio rules); `wallTime` seconds since the
/// Unix epoch (for event stamps and wall-clock rules).
public protocol EngineClock: Sendable {
    var now: Double { get }
    var wallTime: Double { get }
    /// Sleeps until `now` reaches `deadline` (or throws on cancellation).
    func sleep(until deadline: Double) async throws
}

/// The real clock: CLOCK_MONOTONIC and the system time.
public struct SystemClock: EngineClock {
    public init() {}
    public var now: Double {
        SystemClock.monotonic()
    }
    public var wallTime: Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
    /// Sleeps in steps of at most a day, so that any deadline (even a distant or infinite one)
    /// is in range; a NaN deadline returns at once.
    public func sleep(until deadline: Double) async throws {
        while true {
            let delta = deadline - now
            guard delta > 0 else { return }
            try await Task.sleep(nanoseconds: UInt64(min(delta, 86400) * 1e9))
        }
    }
    static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

#if canImport(Glibc)
import Glibc
#endif

extension String {
    /// The longest prefix of at most `bytes` bytes of UTF-8 that ends on a character boundary
    /// (the whole string when it is short enough).
    func prefix(utf8Bytes bytes: Int) -> String {
        guard utf8.count > bytes else { return self }
        var kept = 0
        for character in self {
            let size = character.utf8.count
            if kept + size > bytes { break }
            kept += size
        }
        return String(decoding: utf8.prefix(kept), as: UTF8.self)
    }
}
