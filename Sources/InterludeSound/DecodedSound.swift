/// Decoded PCM audio, ready to upload to PulseAudio's sample cache (S3).
///
/// Samples are interleaved signed 16-bit (`s16ne`): frame `f`, channel `c` is
/// `pcm[f * channels + c]`. Produced by ``SoundDecoder/decode(path:maxDuration:maxBytes:)``.
public struct DecodedSound: Sendable, Equatable {
    /// Interleaved signed 16-bit samples; `pcm.count == frames * channels`.
    public var pcm: [Int16]
    /// Frames per second, in Hz (e.g. 48000).
    public var sampleRate: Int
    /// Number of interleaved channels (1 = mono, 2 = stereo, …).
    public var channels: Int

    /// Creates a sound from interleaved samples. No validation: `pcm.count` should be a
    /// multiple of `channels`.
    public init(pcm: [Int16], sampleRate: Int, channels: Int) {
        self.pcm = pcm
        self.sampleRate = sampleRate
        self.channels = channels
    }

    /// Number of frames (one sample per channel each); 0 when `channels` is not positive.
    public var frames: Int { channels > 0 ? pcm.count / channels : 0 }

    /// Length in seconds (`frames / sampleRate`); 0 when `sampleRate` is not positive.
    public var duration: Double { sampleRate > 0 ? Double(frames) / Double(sampleRate) : 0 }

    /// Size of the PCM data in bytes (`pcm.count * 2`), the size the sample cache holds (S3).
    public var byteCount: Int { pcm.count * MemoryLayout<Int16>.size }
}
