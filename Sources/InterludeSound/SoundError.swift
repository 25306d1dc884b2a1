/// Why a sound cannot be used (POLICY.md S1, S2).
///
/// The daemon never crashes on a bad sound: it logs this error (by ``code``), plays the default
/// sound instead and still delivers the notification (S1). ``code`` values are stable and are the
/// ones used in logs and in the protocol; ``description`` is human-readable text that may change.
public enum SoundError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No file at `path` (S1). Code `soundNotFound`.
    case notFound(path: String)
    /// The file exists but cannot be read: permissions, I/O error, a directory or another
    /// non-regular file (S1). `reason` is the system's message. Code `soundUnreadable`.
    case unreadable(path: String, reason: String)
    /// The file is readable but libsndfile does not recognise it as audio it can decode (S1).
    /// `reason` is libsndfile's `sf_strerror` text. Code `soundNotAudio`.
    case notAudio(path: String, reason: String)
    /// The file has no audio: a 0-byte file or a valid header with 0 frames (S1). Code `soundEmpty`.
    case empty(path: String)
    /// Longer than the limit (S1: default 30 s). `seconds` and `limit` are in seconds; `seconds`
    /// is the header's length, or the length decoded so far when the header understated it.
    /// Code `soundTooLong`.
    case tooLong(path: String, seconds: Double, limit: Double)
    /// Decoded PCM (16-bit, all channels) larger than the sample-cache limit (S3: default 16 MiB).
    /// `bytes` and `limit` are in bytes; `bytes` is the size it would have decoded to, or at least
    /// `limit + 1` when the decoder could not know the length in advance. Code `soundTooLarge`.
    case tooLarge(path: String, bytes: Int, limit: Int)
    /// A path that lies outside every sound folder, after resolving symlinks and `..` (S2).
    /// Code `soundOutsideFolders`.
    case outsideSoundFolders(path: String)

    /// Stable identifier for logs and the protocol, e.g. `"soundTooLong"`.
    public var code: String {
        switch self {
        case .notFound: "soundNotFound"
        case .unreadable: "soundUnreadable"
        case .notAudio: "soundNotAudio"
        case .empty: "soundEmpty"
        case .tooLong: "soundTooLong"
        case .tooLarge: "soundTooLarge"
        case .outsideSoundFolders: "soundOutsideFolders"
        }
    }

    /// The path (or name) the error is about.
    public var path: String {
        switch self {
        case .notFound(let p), .unreadable(let p, _), .notAudio(let p, _), .empty(let p),
             .tooLong(let p, _, _), .tooLarge(let p, _, _), .outsideSoundFolders(let p):
            p
        }
    }

    /// `path: detail [code]`, for logs and the protocol's warnings (the code ends the line, as
    /// every error's does; it led the line before, and PROTOCOL.md said otherwise). Not stable;
    /// match on ``code`` instead.
    public var description: String {
        let detail: String
        switch self {
        case .notFound(let p): detail = "\(p): no such file"
        case .unreadable(let p, let reason): detail = "\(p): \(reason)"
        case .notAudio(let p, let reason): detail = "\(p): not audio libsndfile can decode (\(reason))"
        case .empty(let p): detail = "\(p): no audio frames"
        case .tooLong(let p, let seconds, let limit): detail = "\(p): \(Self.format(seconds)) s long, limit \(Self.format(limit)) s"
        case .tooLarge(let p, let bytes, let limit): detail = "\(p): \(bytes) bytes decoded, limit \(limit) bytes"
        case .outsideSoundFolders(let p): detail = "\(p): outside the sound folders"
        }
        return detail + " [\(code)]"
    }

    /// Seconds with up to three decimals, without Foundation.
    private static func format(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "\(seconds)" }
        let millis = Int((seconds * 1000).rounded())
        let whole = millis / 1000, frac = abs(millis % 1000)
        if frac == 0 { return "\(whole)" }
        var f = String(frac)
        while f.count < 3 { f = "0" + f }
        while f.hasSuffix("0") { f.removeLast() }
        return "\(whole).\(f)"
    }
}
