import Foundation

/// The gains and mutes this daemon has left on other apps' streams, saved in the state folder
/// (`applied-gains.json`), so that a daemon killed during a duck (SIGKILL: no clean stop) is
/// undone by the next run: it takes each gain over and puts the user's volume back (A7: a duck is
/// a limit on top of the user's volume, never a change of it). A stream is known by its sink-input
/// index together with its pid and application name, so that a stream of a restarted server with
/// the same index is not mistaken for it.
///
/// The daemon makes one at start-up and hands it to ``PulseAudioBackend``, which writes it on every
/// gain and mute it applies and reads it as streams appear. Thread-safe (one lock); every change is
/// written to the file at once.
public final class GainLedger: @unchecked Sendable {
    struct Entry: Codable, Equatable {
        var pid: Int32?
        var app: String?
        /// The gain left on top of the user's volume, dB (0 = none).
        var gainDb: Double
        /// Whether the daemon left it muted (A8, A12).
        var muted: Bool
        /// The user's volume under the gain, raw `pa_volume_t` per channel (65536 = 100 %), as the
        /// adapter tracks it: written before the daemon's first write of a gain on the stream and
        /// again whenever the user changes the volume during a duck. Absent in files written
        /// before it existed (then `gainDb` is divided out, as those runs did).
        var user: [UInt32]?
        /// True in every entry this version writes: then a missing `user` means the daemon had not
        /// yet written a gain on the stream (killed between the entry and the adapter's first
        /// read), so its volume is still the user's. Absent (nil) in files of older versions.
        var keepsUser: Bool?
    }

    private let path: String?
    private let lock = NSLock()
    private var entries: [String: Entry] = [:]

    /// Reads what an earlier run left in `path`. A file that is missing, unreadable or not a ledger
    /// is taken as empty (nothing to undo); nothing is thrown.
    /// - Parameter path: the file (the daemon's is `applied-gains.json` in its state folder), nil for
    ///   none (nothing is kept across runs).
    public init(path: String?) {
        self.path = path
        if let path, let data = FileManager.default.contents(atPath: path),
           let saved = try? JSONDecoder().decode([String: Entry].self, from: data) {
            entries = saved
        }
    }

    /// How many streams the ledger holds now: when the daemon starts, how many streams the file
    /// names (gains or mutes an earlier run left, undone as the streams are seen, A7).
    public var count: Int { lock.withLock { entries.count } }

    /// Records what the daemon leaves on a stream now; a stream at 0 dB and unmuted is forgotten.
    /// - Parameter user: the stream's user volume (raw per channel) if known; nil keeps the one
    ///   recorded.
    func record(_ index: UInt32, pid: Int32?, app: String?, gainDb: Double?, muted: Bool?, user: [UInt32]? = nil) {
        lock.withLock {
            var e = entries[String(index)] ?? Entry(pid: pid, app: app, gainDb: 0, muted: false)
            if let gainDb { e.gainDb = gainDb }
            if let muted { e.muted = muted }
            if let user { e.user = user }
            e.keepsUser = true
            let before = entries[String(index)]
            entries[String(index)] = (e.gainDb == 0 && !e.muted) ? nil : e
            if entries[String(index)] != before { saveLocked() }
        }
    }

    /// Records the user's volume of a stream the ledger holds (the adapter saw it set or changed
    /// under a gain, A7); a stream the ledger does not hold (nothing left on it) is not added.
    /// Written at once, like every change: `Data.write(options: .atomic)` is a write() and a
    /// rename(), no fsync, so it is quick enough for the adapter's mainloop thread and a SIGKILL
    /// right after it loses nothing (the kernel has the data; only a power cut could).
    func recordUser(_ index: UInt32, _ user: [UInt32]) {
        lock.withLock {
            guard var e = entries[String(index)], e.user != user else { return }
            e.user = user
            entries[String(index)] = e
            saveLocked()
        }
    }

    /// Forgets a stream that went away.
    func forget(_ index: UInt32) {
        lock.withLock { if entries.removeValue(forKey: String(index)) != nil { saveLocked() } }
    }

    /// Forgets every stream: the audio server went away and its streams with it (a gain left on a
    /// stream of the old server must not be "undone" on a new stream that got the same index, pid
    /// and app, such as a reference app's reopened stream: that wrote +14 dB, issue 7 hole 13).
    func forgetAll() {
        lock.withLock { if !entries.isEmpty { entries.removeAll(); saveLocked() } }
    }

    /// What an earlier run left on this stream, if it is the same stream (pid and app match); the
    /// entry is removed.
    func take(_ index: UInt32, pid: Int32?, app: String?) -> Entry? {
        lock.withLock {
            guard let e = entries[String(index)] else { return nil }
            entries[String(index)] = nil
            saveLocked()
            return e.pid == pid && e.app == app ? e : nil
        }
    }

    private func saveLocked() {
        guard let path, let data = try? JSONEncoder().encode(entries) else { return }
        try? data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}
