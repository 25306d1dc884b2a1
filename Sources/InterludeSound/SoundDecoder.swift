import CSndfile
import Glibc
import Synchronization

/// Decodes sound files into 16-bit PCM with libsndfile (S1). The only place in the package that
/// calls libsndfile's read API.
///
/// Every failure is a ``SoundError``; a bad, hostile or truncated file never crashes the caller.
public enum SoundDecoder {
    /// The default length limit in seconds (S1: 30 s).
    public static let defaultMaxDuration: Double = 30
    /// The default decoded-size limit in bytes (S3: 16 MiB per sample-cache entry).
    public static let defaultMaxBytes: Int = 16 * 1024 * 1024

    /// Decodes any format the installed libsndfile reads (WAV, AIFF, CAF, FLAC, Ogg Vorbis/Opus,
    /// MP3, …) into interleaved signed 16-bit PCM at the file's own rate and channel count
    /// (no resampling, no down-mixing). Implements S1.
    ///
    /// The file is opened with `open(2)` (`O_NONBLOCK`, so a FIFO cannot hang the caller) and
    /// handed to `sf_open_fd`. Samples are read with `sf_readf_float` (normalised to ±1.0) and
    /// converted here: `round(x × 32768)`, clamped to the Int16 range, NaN → 0. This is exact for
    /// 16-bit sources and correct for float WAV/AIFF/CAF, which `sf_readf_short` would return
    /// unscaled (0.5 → 0) unless `SFC_SET_SCALE_FLOAT_INT_READ`, which peak-normalises instead.
    /// The length is checked against the header
    /// before decoding and again while decoding, so a 45-minute file is refused without being
    /// read.
    ///
    /// - Parameters:
    ///   - path: the file to read (absolute or relative to the working directory). No S2 check
    ///     here: resolve names and check folders with ``SoundLookup`` first.
    ///   - maxDuration: longest accepted sound in seconds (S1 default 30).
    ///   - maxBytes: largest accepted decoded size in bytes (`frames * channels * 2`; S3 default
    ///     16 MiB).
    /// - Returns: the decoded sound; `frames > 0`, `sampleRate > 0`, `channels > 0`.
    /// - Throws: ``SoundError/notFound(path:)`` if nothing is at `path`;
    ///   ``SoundError/unreadable(path:reason:)`` for permission or I/O errors, a directory or
    ///   another non-regular file; ``SoundError/notAudio(path:reason:)`` when libsndfile rejects
    ///   the content (reason from `sf_strerror`); ``SoundError/empty(path:)`` for a 0-byte file
    ///   or 0 frames; ``SoundError/tooLong(path:seconds:limit:)`` and
    ///   ``SoundError/tooLarge(path:bytes:limit:)`` over the limits.
    public static func decode(
        path: String,
        maxDuration: Double = defaultMaxDuration,
        maxBytes: Int = defaultMaxBytes
    ) throws(SoundError) -> DecodedSound {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            let err = errno
            if err == ENOENT || err == ENOTDIR {
                throw .notFound(path: path)
            }
            throw .unreadable(path: path, reason: systemMessage(err))
        }
        defer { close(fd) }

        var st = stat()
        if fstat(fd, &st) != 0 {
            throw .unreadable(path: path, reason: systemMessage(errno))
        }
        let type = st.st_mode & S_IFMT
        if type == S_IFDIR {
            throw .unreadable(path: path, reason: "is a directory")
        }
        if type != S_IFREG {
            throw .unreadable(path: path, reason: "not a regular file")
        }
        if st.st_size == 0 {
            throw .empty(path: path)
        }
        // Back to blocking reads for libsndfile.
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }

        var info = SF_INFO()
        let file: OpaquePointer
        switch openSndfile(fd: fd, info: &info) {
        case .success(let handle): file = handle
        case .failure(let reason):
            // A read error while probing the header surfaces as a system error.
            if reason.hasPrefix("System error") {
                throw .unreadable(path: path, reason: reason)
            }
            throw .notAudio(path: path, reason: reason)
        }
        defer { sf_close(file) }

        let channels = Int(info.channels)
        let rate = Int(info.samplerate)
        guard channels > 0, rate > 0 else {
            throw .notAudio(path: path, reason: "invalid header: \(channels) channels at \(rate) Hz")
        }
        // Normalised float reads (the default, made explicit): every format comes back as ±1.0.
        _ = sf_command(file, Int32(SFC_SET_NORM_FLOAT), nil, Int32(SF_TRUE))

        // The header's frame count: exact for PCM containers, an estimate for some compressed
        // formats, SF_COUNT_MAX when unknown. Refuse early on it, then re-check while reading.
        let declared = info.frames
        let bytesPerFrame = channels * MemoryLayout<Int16>.size
        let maxFramesByBytes = maxBytes / bytesPerFrame
        let maxFramesByTime = maxDuration * Double(rate)
        if declared > 0 && declared < Int64.max / 2 {
            let seconds = Double(declared) / Double(rate)
            if seconds > maxDuration {
                throw .tooLong(path: path, seconds: seconds, limit: maxDuration)
            }
            if declared > Int64(maxFramesByBytes) {
                let bytes = declared.multipliedReportingOverflow(by: Int64(bytesPerFrame))
                throw .tooLarge(path: path, bytes: bytes.overflow ? Int.max : Int(bytes.partialValue), limit: maxBytes)
            }
        }

        // Read in chunks until EOF: trust the data, not the header.
        var pcm: [Int16] = []
        if declared > 0 && declared <= Int64(maxFramesByBytes) {
            pcm.reserveCapacity(Int(declared) * channels)
        }
        let chunkFrames = max(1, 65536 / channels)
        var chunk = [Float](repeating: 0, count: chunkFrames * channels)
        var frames = 0
        while true {
            let got = chunk.withUnsafeMutableBufferPointer { buf in
                sf_readf_float(file, buf.baseAddress, sf_count_t(chunkFrames))
            }
            if got <= 0 { break }
            frames += Int(got)
            if Double(frames) > maxFramesByTime {
                // Unknown or understated length: report what we know so far.
                throw .tooLong(path: path, seconds: Double(frames) / Double(rate), limit: maxDuration)
            }
            if frames > maxFramesByBytes {
                throw .tooLarge(path: path, bytes: frames * bytesPerFrame, limit: maxBytes)
            }
            for x in chunk[0..<(Int(got) * channels)] {
                pcm.append(int16(x))
            }
        }
        let status = sf_error(file)
        if status != 0, let message = sf_strerror(file) {
            let reason = String(cString: message)
            if frames == 0 {
                if reason.hasPrefix("System error") {
                    throw .unreadable(path: path, reason: reason)
                }
                throw .notAudio(path: path, reason: reason)
            }
            // Otherwise keep what decoded: a truncated tail still plays (S1: never fail harder
            // than needed).
        }
        if frames == 0 {
            throw .empty(path: path)
        }
        return DecodedSound(pcm: pcm, sampleRate: rate, channels: channels)
    }

    /// A normalised float sample (±1.0 = full scale) as Int16: `round(x × 32768)` clamped to
    /// −32768…32767; NaN becomes 0. Exact inverse of libsndfile's 16-bit → float (`x / 32768`).
    static func int16(_ x: Float) -> Int16 {
        guard !x.isNaN else { return 0 }
        let scaled = (x * 32768).rounded()
        if scaled >= 32767 { return .max }
        if scaled <= -32768 { return .min }
        return Int16(scaled)
    }

    // MARK: - libsndfile global state

    /// libsndfile keeps the error of a failed open in a process-wide variable read by
    /// `sf_strerror(NULL)`; serialise opens so each caller reads its own message.
    private static let openLock = Mutex(())

    private enum OpenResult { case success(OpaquePointer), failure(String) }

    private static func openSndfile(fd: Int32, info: inout SF_INFO) -> OpenResult {
        openLock.withLock { _ in
            // libsndfile opens its own descriptor of the same file (through /proc/self/fd) and
            // closes it itself. Handing it ours with sf_open_fd(…, SF_FALSE) raced: after a failed
            // open our descriptor could be closed twice, the second time someone else's reused
            // number (seen: concurrent decodes got each other's errors).
            if let handle = sf_open("/proc/self/fd/\(fd)", Int32(SFM_READ), &info) {
                return .success(handle)
            }
            let message = sf_strerror(nil).map { String(cString: $0) } ?? "unknown libsndfile error"
            return .failure(message)
        }
    }

    static func systemMessage(_ err: Int32) -> String {
        String(cString: strerror(err))
    }
}
