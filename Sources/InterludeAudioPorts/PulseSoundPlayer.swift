import Foundation
import InterludeEngine
import Synchronization
import InterludePulse
import InterludeSound
import InterludeWire

/// The engine's sound port: S2 lookup, S1 decoding with libsndfile, S3 sample cache on PulseAudio.
/// A sound that cannot be used is replaced by the default sound, with a warning (S1).
public actor PulseSoundPlayer: SoundPlayer {
    /// Decoding and the sample cache's calls block: they run on a thread of their own, never on
    /// Swift's pool (``BlockingWorkExecutor``, issue 9).
    public nonisolated var unownedExecutor: UnownedSerialExecutor { BlockingWorkExecutor.shared.asUnownedSerialExecutor() }
    let connection: PulseConnection
    var lookup: SoundLookup
    var defaultName: String
    var maxDuration: Double
    var maxBytes: Int
    /// Uploaded samples by resolved file path: sample name, duration (seconds), and the file's
    /// identity when it was decoded (a file changed since is decoded and uploaded again).
    var cache: [String: (sample: String, duration: Double, file: FileIdentity)] = [:] {
        didSet { sampleNames.withLock { $0 = cache.values.map(\.sample).sorted() } }
    }
    /// The cache's sample names, sorted, readable without waiting for the player: `status` must
    /// not queue behind uploads and plays that wait for a stalled audio server (up to 10 s each;
    /// a stranger saw `interlude status` time out after 30 s behind three notification sounds).
    private let sampleNames = Mutex<[String]>([])
    /// Numbers sample names, so that a re-uploaded sound never reuses a name.
    var uploads = 0
    /// Until when (``ProcessInfo/systemUptime``, seconds) the server is not asked again: it left an
    /// upload or a play unanswered for `PulseConnection.operationTimeout` (frozen, SIGSTOP'd, or
    /// swamped). Requests meanwhile fail at once with `audioUnavailable`, instead of each waiting
    /// 10 s in turn (20 s with the default sound's upload after the requested one's), and the
    /// samples they would have uploaded are not left in a cache the daemon never hears back from.
    var unansweredUntil: Double? {
        didSet { unansweredMirror.withLock { $0 = unansweredUntil } }
    }
    /// ``unansweredUntil``, readable without waiting for the player (as ``sampleNames``).
    private let unansweredMirror = Mutex<Double?>(nil)
    /// How long the server is left alone after it did not answer (seconds); then one request tries.
    public static let retryAfterUnanswered = 5.0

    /// Notes a failed call to the server: a timeout starts the pause (``unansweredUntil``).
    func noteFailure(_ error: any Error) {
        if (error as? PulseError)?.code == "timeout" {
            unansweredUntil = ProcessInfo.processInfo.systemUptime + Self.retryAfterUnanswered
        }
    }

    /// Throws `audioUnavailable` while the server is left alone (``unansweredUntil``).
    func refuseWhileUnanswered() throws(WireError) {
        if let why = unansweredReason { throw WireError(.audioUnavailable, "cannot play on the audio server: \(why)") }
    }

    /// Why the server is not asked now, or nil.
    var unansweredReason: String? { Self.reason(until: unansweredUntil) }

    /// For `status`, answered at once (it must not wait behind a play): ``unansweredReason`` while
    /// the server is left alone; after that, until a call succeeds, that its last call went
    /// unanswered and when (a stranger's find: 5 s after, `status` said nothing of a server still frozen).
    public nonisolated func unavailableReason() async -> String? {
        guard let until = unansweredMirror.withLock({ $0 }) else { return nil }
        if let why = Self.reason(until: until) { return why }
        let ago = ProcessInfo.processInfo.systemUptime - (until - Self.retryAfterUnanswered)
        return "the audio server left its last call unanswered (\(PulseConnection.operationTimeout) s) \(String(format: "%.0f", ago)) s ago; the next sound asks it again"
    }

    static func reason(until: Double?) -> String? {
        guard let until else { return nil }
        let left = until - ProcessInfo.processInfo.systemUptime
        guard left > 0 else { return nil }
        // Rounded up: "in 0.0 s" read as if it had been asked already.
        let shown = (left * 10).rounded(.up) / 10
        return "the audio server did not answer within \(PulseConnection.operationTimeout) s; it is asked again in \(String(format: "%.1f", shown)) s"
    }

    /// What tells that a file changed: device, inode, size, modification time and status-change
    /// time (which a write changes and `touch -r` cannot set back).
    struct FileIdentity: Equatable {
        var device: UInt64, inode: UInt64, size: Int64
        var modified: Int64, modifiedNanoseconds: Int, changed: Int64, changedNanoseconds: Int
        init?(path: String) {
            var st = stat()
            guard stat(path, &st) == 0 else { return nil }
            device = UInt64(st.st_dev); inode = UInt64(st.st_ino); size = Int64(st.st_size)
            modified = Int64(st.st_mtim.tv_sec); modifiedNanoseconds = Int(st.st_mtim.tv_nsec)
            changed = Int64(st.st_ctim.tv_sec); changedNanoseconds = Int(st.st_ctim.tv_nsec)
        }
    }

    /// Uploads nothing yet: the default sound goes into the cache on ``serverRestarted()``, which
    /// the engine calls on every connection to the server (S3).
    /// - Parameters:
    ///   - connection: the connection to the audio server (its sample cache).
    ///   - lookup: where names are looked up (S2).
    ///   - defaultName: the sound played instead of one that cannot be used (S1).
    ///   - maxDuration: longest sound decoded, seconds (S1).
    ///   - maxBytes: largest file decoded, bytes (S1).
    public init(connection: PulseConnection, lookup: SoundLookup, defaultName: String, maxDuration: Double, maxBytes: Int) {
        self.connection = connection; self.lookup = lookup; self.defaultName = defaultName
        self.maxDuration = maxDuration; self.maxBytes = maxBytes
    }

    /// Resolves (S2), decodes and uploads once (S1, S3) and plays a sound from the sample cache with
    /// `media.role` "event" and `event.id` the name; a sound that cannot be used is replaced by the
    /// default sound with the reason as the result's warning (S1). `NAME.disabled` plays nothing
    /// (result `played` "none", warning `silenced`, S2). A play the server refuses (it restarted and
    /// lost the cache) is tried once more after uploading again.
    /// - Parameters:
    ///   - nameOrPath: a sound name or a file path.
    ///   - volume: linear amplitude 0…1.
    ///   - properties: stream properties added to the sample's playback.
    /// - Returns: what played, the warning if it was not the sound asked for, its duration (seconds).
    /// - Throws: ``WireError`` `audioUnavailable` when the audio server is away (not connected) or
    ///   cannot play or upload the sound; `soundFailed` when not even the default sound can be used
    ///   for another reason (the message says why the requested sound failed and why the default did).
    public func play(_ nameOrPath: String, volume: Double, properties: [String: String]) async throws(WireError) -> SoundPlayResult {
        // S2: `NAME.disabled` is silent on purpose: nothing plays (not the default, which is for
        // sounds that cannot be used, S1).
        if case let .disabled(marker) = lookup.resolve(nameOrPath) {
            return SoundPlayResult(played: "none", warning: WireError(.silenced, "\(nameOrPath) is disabled on purpose (\(marker)): silent [S2]"),
                                   duration: 0)
        }
        var warning: WireError?
        let entry: (sample: String, duration: Double)
        do {
            entry = try load(nameOrPath)
        } catch let requested {
            warning = requested.wire
            do { entry = try load(defaultName) } catch {
                throw Self.neitherPlays(nameOrPath, requested: nameOrPath == defaultName ? nil : requested, default: error,
                                        defaultName: defaultName)
            }
        }
        var props = properties
        props["media.role"] = "event"
        props["event.id"] = nameOrPath
        try refuseWhileUnanswered()
        do {
            _ = try connection.playSample(name: entry.sample, volume: volume, properties: props)
            unansweredUntil = nil
        } catch {
            noteFailure(error)
            try refuseWhileUnanswered()
            // The server may have restarted and dropped the cache: upload again once.
            cache = [:]
            do {
                let again = try load(warning == nil ? nameOrPath : defaultName)
                _ = try connection.playSample(name: again.sample, volume: volume, properties: props)
                unansweredUntil = nil
            } catch {
                noteFailure(error)
                let why = (error as? LoadFailure).map { "\($0.wire)" } ?? "\(error)"
                throw WireError(.audioUnavailable, "cannot play on the audio server: \(why)")
            }
        }
        return SoundPlayResult(played: warning == nil ? nameOrPath : defaultName, warning: warning, duration: entry.duration)
    }

    /// The error when neither the requested sound nor the default can play. The audio server
    /// being away (its connection not ready, for either upload) is `audioUnavailable`, as
    /// PROTOCOL.md's `sound.play` says, not `soundFailed`: no sound could have played, whatever the
    /// file. Otherwise `soundFailed`. The message says why each failed: the requested sound's
    /// reason too, not only the default's.
    /// - Parameters:
    ///   - nameOrPath: the sound asked for.
    ///   - requested: why it could not be used; nil when it is the default sound itself.
    ///   - defaultFailure: why the default sound could not be used either.
    ///   - defaultName: the default sound's name.
    static func neitherPlays(_ nameOrPath: String, requested: LoadFailure?, default defaultFailure: LoadFailure,
                             defaultName: String) -> WireError {
        let message: String
        if let requested {
            message = "neither \(nameOrPath) nor the default sound (\(defaultName)) can play: \(nameOrPath): \(requested.wire.message); "
                + "\(defaultName): \(defaultFailure.wire.message)"
        } else {
            message = "the default sound (\(defaultName)) cannot play: \(defaultFailure.wire.message)"
        }
        let away = defaultFailure.serverAway || requested?.serverAway == true
        return WireError(away ? .audioUnavailable : .soundFailed, message)
    }

    /// Why ``load(_:)`` failed: the error a request sees, and whether it was the audio server
    /// being away (then nothing could have played, whatever the sound).
    struct LoadFailure: Error {
        var wire: WireError
        var serverAway = false
        init(_ wire: WireError, serverAway: Bool = false) { self.wire = wire; self.serverAway = serverAway }
    }

    /// Whether a failure of the connection means the audio server is away (not connected, or it
    /// could not be reached), rather than a refusal of this one sound.
    static func serverAway(_ error: any Error) -> Bool {
        guard let e = error as? PulseError else { return false }
        return e.code == "notConnected" || e.code == "connectionFailed"
    }

    /// Resolves, decodes and uploads a sound once (S3).
    /// - Throws: ``LoadFailure``: `notFound`, `notAuthorized` or `badRequest` for a sound that
    ///   cannot be used (S1, S2), `audioUnavailable` when the sample cache does not take it (with
    ///   `serverAway` when the connection to the server is not ready).
    func load(_ nameOrPath: String) throws(LoadFailure) -> (sample: String, duration: Double) {
        let path: String
        switch lookup.resolve(nameOrPath) {
        case let .file(p): path = p
        case let .disabled(p): throw LoadFailure(WireError(.notFound, "\(nameOrPath) is disabled on purpose (\(p))"))
        case .notFound: throw LoadFailure(WireError(.notFound, "no sound named \"\(nameOrPath)\" [soundNotFound]"))
        case let .refused(e): throw LoadFailure(WireError(.notAuthorized, "\(e)"))  // "path: why [code]"
        }
        let identity = FileIdentity(path: path)
        if let hit = cache[path] {
            if hit.file == identity { return (hit.sample, hit.duration) }
            // Replaced or edited since it was uploaded: drop the old sample, decode the file again.
            try? connection.removeSample(name: hit.sample)
            cache[path] = nil
        }
        let sound: DecodedSound
        do { sound = try SoundDecoder.decode(path: path, maxDuration: maxDuration, maxBytes: maxBytes) } catch {
            throw LoadFailure(WireError(.badRequest, "\(error)"))  // "path: why [code]"
        }
        if let why = unansweredReason {
            throw LoadFailure(WireError(.audioUnavailable, "cannot upload \(path) to the sample cache: \(why)"), serverAway: true)
        }
        uploads += 1
        let sample = "interlude-\(uploads)-" + (path as NSString).lastPathComponent
        do { try connection.uploadSample(name: sample, pcm: sound.pcm, sampleRate: sound.sampleRate, channels: sound.channels) } catch {
            noteFailure(error)
            let away = Self.serverAway(error) || unansweredReason != nil
            throw LoadFailure(WireError(.audioUnavailable, (away ? "the audio server is not connected: " : "")
                                        + "cannot upload \(path) to the sample cache: \(error)"), serverAway: away)
        }
        if let identity { cache[path] = (sample, sound.duration, identity) }
        return (sample, sound.duration)
    }

    /// The names of the samples this player uploaded, sorted (`status`): read at once, even while
    /// the player waits for the audio server.
    public nonisolated func cachedSamples() async -> [String] { sampleNames.withLock { $0 } }

    /// A reloaded config's sound folders and limits (S1, S2). Samples already uploaded stay in the
    /// cache, keyed by file: a name that now resolves to another file is decoded on its next use.
    /// The default sound is loaded again at once (errors ignored: a play then reports them).
    /// - Parameters: as ``init(connection:lookup:defaultName:maxDuration:maxBytes:)``.
    public func reconfigure(lookup: SoundLookup, defaultName: String, maxDuration: Double, maxBytes: Int) {
        self.lookup = lookup; self.defaultName = defaultName; self.maxDuration = maxDuration; self.maxBytes = maxBytes
        _ = try? load(defaultName)
    }

    /// Called on every connection to the server, the first included: the cache is gone with a
    /// restarted server, and the default sound goes back in at once (S3), so that no request (the
    /// first `interlude play default` after start-up included) waits for decoding and uploading.
    public func serverRestarted() async {
        cache = [:]
        _ = try? load(defaultName)
    }
}
