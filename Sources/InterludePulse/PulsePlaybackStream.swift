import CPulse
import Foundation

/// A playback stream of our own: the reference apps of the CLI and the scenario runner.
///
/// The stream is created, connected to the default sink and playing when `init` returns. Audio is
/// generated on PulseAudio's mainloop thread in the write callback (no thread of ours runs).
public final class PulsePlaybackStream: @unchecked Sendable {
    /// What the stream plays.
    public enum Source: Sendable {
        /// A steady sine of `frequency` Hz and peak `amplitude` (0…1 of full scale; the scenario
        /// tones use 0.25), as 48 kHz stereo float32.
        case sine(frequency: Double, amplitude: Double)
        /// Interleaved signed 16-bit PCM at `sampleRate` with `channels` channels, played once
        /// (then silence) or looped.
        case pcm(samples: [Int16], sampleRate: Int, channels: Int, loop: Bool)
    }

    /// The sine streams' sample rate, Hz.
    public static let sineSampleRate = 48000

    private let connection: PulseConnection
    private let source: Source
    private let channels: Int
    private let bytesPerFrame: Int
    // Mainloop thread / lock only.
    private var stream: OpaquePointer?
    private var phase = 0.0
    private var position = 0
    private var index = invalidIndex

    /// The server's index of this stream's sink input.
    public var sinkInputIndex: UInt32 { connection.withLock { index } }

    /// Creates the stream and connects it to the default sink, playing (uncorked).
    ///
    /// - Parameters:
    ///   - connection: a connected ``PulseConnection``.
    ///   - name: the stream's `media.name`.
    ///   - source: what to play.
    ///   - properties: stream properties, e.g. `media.role`, `interlude.session`.
    ///   - latency: target buffer in seconds (`tlength`, with `PA_STREAM_ADJUST_LATENCY`).
    /// - Throws: `invalidArgument` (frequency outside 0…Nyquist, amplitude outside 0…1, empty or
    ///   ragged PCM, latency ≤ 0), `notConnected`, `timeout`, `operationFailed`.
    public init(connection: PulseConnection, name: String, source: Source, properties: [String: String],
                latency: Double = 0.05) throws {
        self.connection = connection
        self.source = source
        var spec: pa_sample_spec
        switch source {
        case let .sine(frequency, amplitude):
            guard frequency > 0, frequency < Double(Self.sineSampleRate) / 2, (0...1).contains(amplitude) else {
                throw PulseError.invalidArgument("sine \(frequency) Hz at amplitude \(amplitude)")
            }
            channels = 2
            spec = pa_sample_spec(format: nativeFloat32, rate: UInt32(Self.sineSampleRate), channels: 2)
            bytesPerFrame = 2 * MemoryLayout<Float>.size
        case let .pcm(samples, sampleRate, channels, _):
            guard !samples.isEmpty, (1...Int(PA_CHANNELS_MAX)).contains(channels), samples.count % channels == 0,
                  sampleRate > 0, sampleRate <= Int(PA_RATE_MAX)
            else {
                throw PulseError.invalidArgument("PCM of \(samples.count) samples, \(channels) channels, \(sampleRate) Hz")
            }
            self.channels = channels
            spec = pa_sample_spec(format: nativeS16, rate: UInt32(sampleRate), channels: UInt8(channels))
            bytesPerFrame = channels * MemoryLayout<Int16>.size
        }
        guard latency > 0, latency.isFinite else { throw PulseError.invalidArgument("latency \(latency) s") }
        guard !connection.inMainloopThread else { throw PulseError.wrongThread }

        let list = try makeProplist(properties)
        defer { pa_proplist_free(list) }
        try connection.withLock {
            guard let context = connection.readyContextLocked() else {
                throw PulseError.notConnected("stream \(name): not connected")
            }
            var map = pa_channel_map()
            pa_channel_map_init_extend(&map, UInt32(channels), PA_CHANNEL_MAP_DEFAULT)
            guard let stream = pa_stream_new_with_proplist(context, name, &spec, &map, list) else {
                throw PulseError.fromPulse(connection.contextErrnoLocked(context), "stream \(name)")
            }
            self.stream = stream
            let me = Unmanaged.passUnretained(self).toOpaque()
            pa_stream_set_state_callback(stream, signalStateCallback, UnsafeMutableRawPointer(connection.mainloop))
            pa_stream_set_write_callback(stream, playbackWriteCallback, me)
            let max = UInt32.max  // "server default" for every buffer_attr field
            let target = UInt32(min(Double(UInt32.max / 2), (latency * Double(spec.rate)).rounded()) ) * UInt32(bytesPerFrame)
            var attr = pa_buffer_attr(maxlength: max, tlength: target, prebuf: max, minreq: max, fragsize: max)
            guard pa_stream_connect_playback(stream, nil, &attr, PA_STREAM_ADJUST_LATENCY, nil, nil) >= 0 else {
                let error = PulseError.fromPulse(connection.contextErrnoLocked(context), "stream \(name)")
                closeLocked()
                throw error
            }
            let ready = connection.waitLocked(timeout: PulseConnection.operationTimeout) {
                pa_stream_get_state(stream) != PA_STREAM_CREATING
            }
            guard ready, pa_stream_get_state(stream) == PA_STREAM_READY else {
                let error = ready ? PulseError.fromPulse(connection.contextErrnoLocked(context), "stream \(name)")
                                  : PulseError.timeout("stream \(name): not ready within \(PulseConnection.operationTimeout) s")
                closeLocked()
                throw error
            }
            index = pa_stream_get_index(stream)
        }
    }

    deinit { close() }

    /// Pauses (`true`) or resumes (`false`) the stream (`pa_stream_cork`); returns once the server
    /// has done it.
    /// - Throws: `notConnected` (also after `close()`), `timeout`.
    public func setCorked(_ corked: Bool) throws {
        try connection.perform(corked ? "cork stream" : "uncork stream", { _, userdata in
            guard let stream else { return nil }
            return pa_stream_cork(stream, corked ? 1 : 0, streamSuccessCallback, userdata)
        }, result: { _ in })
    }

    /// Disconnects the stream; its sink input goes away. Idempotent.
    public func close() {
        connection.withLock { closeLocked() }
    }

    private func closeLocked() {
        guard let stream else { return }
        self.stream = nil
        pa_stream_set_write_callback(stream, nil, nil)
        pa_stream_set_state_callback(stream, nil, nil)
        pa_stream_disconnect(stream)
        pa_stream_unref(stream)
    }

    /// Fills what the server asks for (mainloop thread).
    fileprivate func write(_ stream: OpaquePointer, _ requested: Int) {
        var data: UnsafeMutableRawPointer?
        var length = requested
        guard pa_stream_begin_write(stream, &data, &length) >= 0, let data, length >= bytesPerFrame else { return }
        var frames = length / bytesPerFrame
        switch source {
        case let .sine(frequency, amplitude):
            let out = data.bindMemory(to: Float.self, capacity: frames * channels)
            let step = 2 * Double.pi * frequency / Double(Self.sineSampleRate)
            for frame in 0..<frames {
                let value = Float(amplitude * sin(phase))
                for channel in 0..<channels { out[frame * channels + channel] = value }
                phase += step
                if phase >= 2 * Double.pi { phase -= 2 * Double.pi }
            }
        case let .pcm(samples, _, channels, loop):
            let total = samples.count / channels
            if !loop { frames = min(frames, total - position) }
            guard frames > 0 else {
                pa_stream_cancel_write(stream)
                return
            }
            let out = data.bindMemory(to: Int16.self, capacity: frames * channels)
            samples.withUnsafeBufferPointer { input in
                var written = 0
                while written < frames {
                    if position == total { position = 0 }
                    let run = min(frames - written, total - position)
                    (out + written * channels).update(from: input.baseAddress! + position * channels, count: run * channels)
                    written += run
                    position += run
                }
            }
        }
        pa_stream_write(stream, data, frames * bytesPerFrame, nil, 0, PA_SEEK_RELATIVE)
    }
}

private let playbackWriteCallback: pa_stream_request_cb_t = { stream, requested, userdata in
    guard let stream, let userdata else { return }
    Unmanaged<PulsePlaybackStream>.fromOpaque(userdata).takeUnretainedValue().write(stream, requested)
}
