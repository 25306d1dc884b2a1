import Foundation
import InterludeEngine
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
    var cache: [String: (sample: String, duration: Double, file: FileIdentity)] = [:]
    /// Numbers sample names, so that a re-uploaded sound never reuses a name.
    var uploads = 0

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
    /// - Throws: ``WireError`` `soundFailed` when not even the default sound can be used,
    ///   `audioUnavailable` when the server cannot play or upload it.
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
        } catch {
            warning = error
            do { entry = try load(defaultName) } catch {
                throw WireError(.soundFailed, (nameOrPath == defaultName ? "the default sound cannot play: "
                                               : "neither \(nameOrPath) nor the default sound can play: ") + error.message)
            }
        }
        var props = properties
        props["media.role"] = "event"
        props["event.id"] = nameOrPath
        do {
            _ = try connection.playSample(name: entry.sample, volume: volume, properties: props)
        } catch {
            // The server may have restarted and dropped the cache: upload again once.
            cache = [:]
            do {
                let again = try load(warning == nil ? nameOrPath : defaultName)
                _ = try connection.playSample(name: again.sample, volume: volume, properties: props)
            } catch { throw WireError(.audioUnavailable, "cannot play on the audio server: \(error)") }
        }
        return SoundPlayResult(played: warning == nil ? nameOrPath : defaultName, warning: warning, duration: entry.duration)
    }

    /// Resolves, decodes and uploads a sound once (S3).
    func load(_ nameOrPath: String) throws(WireError) -> (sample: String, duration: Double) {
        let path: String
        switch lookup.resolve(nameOrPath) {
        case let .file(p): path = p
        case let .disabled(p): throw WireError(.notFound, "\(nameOrPath) is disabled on purpose (\(p))")
        case .notFound: throw WireError(.notFound, "no sound named \(nameOrPath) [soundNotFound]")
        case let .refused(e): throw WireError(.notAuthorized, "\(e)")  // "code: path: why"
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
            throw WireError(.badRequest, "\(error)")  // "code: path: why"
        }
        uploads += 1
        let sample = "interlude-\(uploads)-" + (path as NSString).lastPathComponent
        do { try connection.uploadSample(name: sample, pcm: sound.pcm, sampleRate: sound.sampleRate, channels: sound.channels) } catch {
            throw WireError(.audioUnavailable, "cannot upload \(path) to the sample cache: \(error)")
        }
        if let identity { cache[path] = (sample, sound.duration, identity) }
        return (sample, sound.duration)
    }

    /// The names of the samples this player uploaded, sorted (`status`).
    public func cachedSamples() async -> [String] { cache.values.map(\.sample).sorted() }

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
