import CSndfile
import Foundation
import Glibc
import InterludeSound
import InterludeTestSupport
import Testing

/// A known 16-bit pattern: the extremes, zero, ±1, then a ramp and an alternating sequence, so
/// a wrong byte order, channel order or bit depth shows.
func knownPattern(frames: Int, channels: Int) -> [Int16] {
    var pcm: [Int16] = []
    let head: [Int16] = [Int16.max, Int16.min, 0, 1, -1]
    for f in 0..<frames {
        for c in 0..<channels {
            let i = f * channels + c
            if i < head.count { pcm.append(head[i]); continue }
            pcm.append(Int16(truncatingIfNeeded: (f &* 131 &+ c &* 10_007) % 65_536 - 32_768))
        }
    }
    return pcm
}

@Suite("S1 decoding")
struct SoundDecoderTests {
    // MARK: Formats of known content

    @Test func S1_decodesWAVWithExactSamples() throws {
        try withTempDir { dir in
            let pcm = knownPattern(frames: 4410, channels: 2)
            let path = dir + "/known.wav"
            try soxFromPCM(pcm, rate: 44100, channels: 2, to: path)
            let sound = try SoundDecoder.decode(path: path)
            #expect(sound.sampleRate == 44100)
            #expect(sound.channels == 2)
            #expect(sound.frames == 4410)
            #expect(sound.pcm == pcm)
            #expect(abs(sound.duration - 0.1) < 1e-9)
            #expect(sound.byteCount == 4410 * 2 * 2)
        }
    }

    @Test func S1_decodesFLACWithExactSamples() throws {
        try withTempDir { dir in
            let pcm = knownPattern(frames: 48000, channels: 1)
            let path = dir + "/known.flac"
            try soxFromPCM(pcm, rate: 48000, channels: 1, to: path)
            let sound = try SoundDecoder.decode(path: path)
            #expect(sound == DecodedSound(pcm: pcm, sampleRate: 48000, channels: 1))
            #expect(sound.duration == 1.0)
        }
    }

    @Test(arguments: ["aiff", "caf"])
    func S1_decodesAIFFAndCAFWithExactSamples(ext: String) throws {
        try withTempDir { dir in
            let pcm = knownPattern(frames: 1000, channels: 2)
            let path = dir + "/known." + ext
            try soxFromPCM(pcm, rate: 22050, channels: 2, to: path)
            let sound = try SoundDecoder.decode(path: path)
            #expect(sound == DecodedSound(pcm: pcm, sampleRate: 22050, channels: 2))
        }
    }

    @Test func S1_decodesOggVorbis() throws {
        try withTempDir { dir in
            let path = dir + "/tone.ogg"
            // 1 s, 440 Hz, half scale, stereo, 48 kHz; Vorbis is lossy, so check shape not samples.
            try soxFromPCM(sine(seconds: 1, rate: 48000, channels: 2, frequency: 440, amplitude: 0.5),
                           rate: 48000, channels: 2, to: path)
            let sound = try SoundDecoder.decode(path: path)
            #expect(sound.sampleRate == 48000)
            #expect(sound.channels == 2)
            #expect(sound.frames == 48000)
            #expect(abs(estimatedFrequency(sound) - 440) < 5)
            #expect(abs(peak(sound.pcm) - 16384) < 1600)
        }
    }

    @Test func S1_decodesOggOpus() throws {
        try withTempDir { dir in
            let path = dir + "/tone.opus"
            try sndfileWrite(path: path, format: Int32(SF_FORMAT_OGG | SF_FORMAT_OPUS), rate: 48000, channels: 1,
                             shorts: sine(seconds: 1, rate: 48000, channels: 1, frequency: 440, amplitude: 0.5))
            let sound = try SoundDecoder.decode(path: path)
            #expect(sound.sampleRate == 48000)
            #expect(sound.channels == 1)
            #expect(abs(sound.frames - 48000) <= 960)  // codec framing may add or trim up to 20 ms
            #expect(abs(estimatedFrequency(sound) - 440) < 5)
            #expect(abs(peak(sound.pcm) - 16384) < 1600)
        }
    }

    @Test func S1_decodesMP3() throws {
        try withTempDir { dir in
            let path = dir + "/tone.mp3"
            // Written from floats: libsndfile 1.2.0's sf_writef_short writes broken stereo MP3.
            try sndfileWrite(path: path, format: Int32(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III), rate: 48000, channels: 2,
                             floats: sine(seconds: 1, rate: 48000, channels: 2, frequency: 440, amplitude: 0.5).map { Float($0) / 32768 })
            let sound = try SoundDecoder.decode(path: path)
            #expect(sound.sampleRate == 48000)
            #expect(sound.channels == 2)
            #expect(abs(sound.frames - 48000) <= 2400)  // encoder delay and padding: up to 50 ms
            #expect(abs(estimatedFrequency(sound) - 440) < 5)
            #expect(abs(peak(sound.pcm) - 16384) < 1600)
        }
    }

    @Test func S1_floatSamplesBeyondFullScaleAreClippedNotWrapped() throws {
        try withTempDir { dir in
            let path = dir + "/hot.wav"
            try sndfileWrite(path: path, format: Int32(SF_FORMAT_WAV | SF_FORMAT_FLOAT), rate: 48000, channels: 1,
                             floats: [0, 0.5, 1.5, -1.5, 0.25, .nan, .infinity, -.infinity, -1])
            let sound = try SoundDecoder.decode(path: path)
            #expect(sound.pcm == [0, 16384, 32767, -32768, 8192, 0, 32767, -32768, -32768])
        }
    }

    /// 24-bit and 32-bit float WAV of a 16-bit pattern (sox widens exactly) decode to the pattern.
    @Test(arguments: [["-b", "24"], ["-b", "32"], ["-e", "floating-point", "-b", "32"], ["-e", "floating-point", "-b", "64"]])
    func S1_decodesWideAndFloatWAVExactly(encoding: [String]) throws {
        try withTempDir { dir in
            let pcm = knownPattern(frames: 2000, channels: 2)
            let source = dir + "/source.wav", path = dir + "/wide.wav"
            try soxFromPCM(pcm, rate: 48000, channels: 2, to: source)
            try sox([source] + encoding + [path])
            let sound = try SoundDecoder.decode(path: path)
            #expect(sound.sampleRate == 48000 && sound.channels == 2)
            #expect(sound.pcm == pcm, "first difference at \(String(describing: Array(zip(sound.pcm, pcm)).firstIndex { $0.0 != $0.1 })), counts \(sound.pcm.count) vs \(pcm.count)")
        }
    }

    // MARK: Limits

    @Test func S1_tooLongFileIsRefused() throws {
        try withTempDir { dir in
            let path = dir + "/long.wav"
            try sox(["-n", "-r", "8000", "-c", "1", "-b", "16", path, "synth", "45", "sine", "440"])
            #expect(decodeError(path) == .tooLong(path: path, seconds: 45, limit: 30))
            #expect(decodeError(path)?.code == "soundTooLong")
            // A caller's own limit is honoured too.
            #expect(decodeError(path, maxDuration: 60) == nil)
        }
    }

    @Test func S1_thirtySecondsExactlyIsAccepted() throws {
        try withTempDir { dir in
            let path = dir + "/thirty.flac"
            try sox(["-n", "-r", "8000", "-c", "1", "-b", "16", path, "synth", "30", "sine", "440"])
            let sound = try SoundDecoder.decode(path: path)
            #expect(sound.duration == 30)
            let over = dir + "/over.flac"
            try sox(["-n", "-r", "8000", "-c", "1", "-b", "16", over, "synth", "30.001", "sine", "440"])
            #expect(decodeError(over)?.code == "soundTooLong")
        }
    }

    @Test func S1_tooLargeDecodedSizeIsRefused() throws {
        try withTempDir { dir in
            let path = dir + "/big.wav"
            try sox(["-n", "-r", "48000", "-c", "2", "-b", "16", path, "synth", "10", "sine", "440"])
            // 10 s × 48000 × 2 channels × 2 bytes = 1 920 000 bytes.
            #expect(decodeError(path, maxBytes: 1_000_000) == .tooLarge(path: path, bytes: 1_920_000, limit: 1_000_000))
            #expect(decodeError(path, maxBytes: 1_920_000) == nil)
            #expect(SoundDecoder.defaultMaxBytes == 16 * 1024 * 1024)
            #expect(SoundDecoder.defaultMaxDuration == 30)
        }
    }

    // MARK: Bad files (never a crash, always a stable code)

    @Test func S1_zeroByteFileIsEmpty() throws {
        try withTempDir { dir in
            let path = dir + "/nothing.wav"
            try writeFile(path, [])
            #expect(decodeError(path) == .empty(path: path))
        }
    }

    @Test func S1_textFileNamedWavIsNotAudio() throws {
        try withTempDir { dir in
            let path = dir + "/text.wav"
            try writeText(path, "This is not a sound, it is a shopping list.\nmilk\neggs\n")
            guard case .notAudio(let p, let reason)? = decodeError(path) else {
                Issue.record("expected notAudio, got \(String(describing: decodeError(path)))")
                return
            }
            #expect(p == path)
            #expect(!reason.isEmpty)
            #expect(decodeError(path)?.code == "soundNotAudio")
        }
    }

    @Test func S1_zeroFrameWAVIsEmpty() throws {
        try withTempDir { dir in
            let path = dir + "/zero.wav"
            try sndfileWrite(path: path, format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16), rate: 48000, channels: 1, shorts: [])
            #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0 > 0)
            #expect(decodeError(path) == .empty(path: path))
            #expect(decodeError(path)?.code == "soundEmpty")
        }
    }

    @Test func S1_directoryIsUnreadable() throws {
        try withTempDir { dir in
            let path = dir + "/folder.wav"
            try makeDir(path)
            #expect(decodeError(path) == .unreadable(path: path, reason: "is a directory"))
            #expect(decodeError(path)?.code == "soundUnreadable")
        }
    }

    @Test func S1_fifoIsUnreadableAndDoesNotHang() throws {
        try withTempDir { dir in
            let path = dir + "/pipe.wav"
            #expect(mkfifo(path, 0o600) == 0)
            #expect(decodeError(path) == .unreadable(path: path, reason: "not a regular file"))
        }
    }

    @Test func S1_missingFileIsNotFound() throws {
        try withTempDir { dir in
            #expect(decodeError(dir + "/missing.wav") == .notFound(path: dir + "/missing.wav"))
            #expect(decodeError(dir + "/missing/x.wav") == .notFound(path: dir + "/missing/x.wav"))
            #expect(decodeError(dir + "/missing.wav")?.code == "soundNotFound")
        }
    }

    @Test func S1_fileUsedAsFolderIsNotFound() throws {
        try withTempDir { dir in
            try writeText(dir + "/plain", "x")
            #expect(decodeError(dir + "/plain/x.wav")?.code == "soundNotFound")  // ENOTDIR
        }
    }

    /// Truncations and seeded byte corruption of valid WAV, FLAC and Ogg files: every result is
    /// a sound or a SoundError, never a crash or a hang.
    @Test func S1_corruptAndTruncatedFilesNeverCrash() throws {
        try withTempDir { dir in
            var outcomes: [String: Int] = [:]
            for ext in ["wav", "flac", "ogg"] {
                let source = dir + "/source." + ext
                try soxFromPCM(sine(seconds: 0.3, rate: 48000, channels: 2, frequency: 660, amplitude: 0.7),
                               rate: 48000, channels: 2, to: source)
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
                var rng = SplitMix64(seed: 0x1D_E5A1)
                var variants: [[UInt8]] = []
                for cut in [1, 4, 8, 12, 16, 36, 44, 45, 64, 100, 1000, bytes.count / 2, bytes.count - 1] where cut < bytes.count {
                    variants.append(Array(bytes[0..<cut]))
                }
                for _ in 0..<40 {
                    var v = bytes
                    let flips = Int.random(in: 1...16, using: &rng)
                    for _ in 0..<flips {
                        // Mostly the header, sometimes anywhere.
                        let limit = Bool.random(using: &rng) ? min(v.count, 256) : v.count
                        v[Int.random(in: 0..<limit, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                    }
                    variants.append(v)
                }
                for (i, v) in variants.enumerated() {
                    let path = dir + "/bad\(i)." + ext
                    try writeFile(path, v)
                    let outcome = decodeError(path)?.code ?? "decoded"
                    outcomes[outcome, default: 0] += 1
                    unlink(path)
                }
            }
            #expect(outcomes.values.reduce(0, +) == 3 * 53)
            let known: Set = ["decoded", "soundNotAudio", "soundEmpty", "soundUnreadable", "soundTooLong", "soundTooLarge"]
            #expect(Set(outcomes.keys).isSubset(of: known))
            print("S1 corruption outcomes: \(outcomes.sorted { $0.key < $1.key })")
        }
    }

    /// Decoding from many tasks at once: each caller gets its own result and its own error text
    /// (libsndfile keeps the last open error in a global, which the decoder reads under a lock).
    @Test func S1_concurrentDecodesGetTheirOwnResults() async throws {
        let root = try makeTempDir()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let good = root + "/good.flac", text = root + "/text.wav", zero = root + "/zero.wav"
        let pcm = knownPattern(frames: 4800, channels: 2)
        try soxFromPCM(pcm, rate: 48000, channels: 2, to: good)
        try writeText(text, "not audio")
        try sndfileWrite(path: zero, format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16), rate: 48000, channels: 1, shorts: [])
        let notAudioReason: String
        if case .notAudio(_, let reason)? = decodeError(text) { notAudioReason = reason } else { notAudioReason = "?" }
        let results = await withTaskGroup(of: (Int, String).self) { group in
            for i in 0..<48 {
                group.addTask {
                    let path = [good, text, zero][i % 3]
                    do throws(SoundError) {
                        let sound = try SoundDecoder.decode(path: path)
                        return (i, sound.pcm == pcm ? "ok" : "wrong samples")
                    } catch {
                        if case .notAudio(_, let reason) = error { return (i, "notAudio:" + reason) }
                        return (i, error.code)
                    }
                }
            }
            var all: [Int: String] = [:]
            for await (i, r) in group { all[i] = r }
            return all
        }
        for (i, r) in results {
            #expect(r == ["ok", "notAudio:" + notAudioReason, "soundEmpty"][i % 3], "task \(i)")
        }
    }

    @Test func S1_errorCodesAreStable() {
        let cases: [(SoundError, String)] = [
            (.notFound(path: "/p"), "soundNotFound"),
            (.unreadable(path: "/p", reason: "r"), "soundUnreadable"),
            (.notAudio(path: "/p", reason: "r"), "soundNotAudio"),
            (.empty(path: "/p"), "soundEmpty"),
            (.tooLong(path: "/p", seconds: 45, limit: 30), "soundTooLong"),
            (.tooLarge(path: "/p", bytes: 2, limit: 1), "soundTooLarge"),
            (.outsideSoundFolders(path: "/p"), "soundOutsideFolders"),
        ]
        for (error, code) in cases {
            #expect(error.code == code)
            #expect(error.path == "/p")
            #expect(error.description.hasPrefix("/p: ") && error.description.hasSuffix(" [\(code)]"))
        }
        #expect(SoundError.tooLong(path: "/a.wav", seconds: 45.5, limit: 30).description
            == "/a.wav: 45.5 s long, limit 30 s [soundTooLong]")
    }
}
