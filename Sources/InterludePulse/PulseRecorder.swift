import CPulse

/// Records a source (e.g. `interlude_out.monitor`, the null sink's monitor) as mono float32, with
/// low latency (`fragsize` 10 ms), for measuring what was played (DESIGN.md "Testing").
///
/// The stream takes the source's own channels and map, and the recorder averages the channels
/// itself: the servers downmix differently. PulseAudio averages stereo to mono; PipeWire's
/// pipewire-pulse sums the channels at −3 dB each (equal power), so a tone on both channels read
/// 3 dB louder through a server-side downmix there. The mean of the channels reads the same on both.
///
/// Samples are appended on PulseAudio's mainloop thread; ``samples()`` copies them out.
public final class PulseRecorder: @unchecked Sendable {
    /// Fragment size asked of the server, seconds.
    static let fragmentSeconds = 0.01
    /// For this long after the first samples, the start time estimate keeps being refined.
    static let settlingSeconds = 2.0

    private let connection: PulseConnection
    /// Frames per second of the recording.
    public let sampleRate: Int
    /// Channels of the recorded stream (the source's), averaged into one.
    private let channels: Int
    // Mainloop thread / lock only.
    private var stream: OpaquePointer?
    private var recorded: [Float] = []
    private var firstChunkTime: Double?
    private var estimatedStart: Double
    private var estimates: [Double] = []

    /// Starts recording `source` at `sampleRate` Hz, in the source's channels, kept as their mean.
    ///
    /// - Throws: `noSuchEntity` if there is no such source, `invalidArgument` for a bad rate,
    ///   `notConnected`, `timeout`.
    public init(connection: PulseConnection, source: String, sampleRate: Int = 48000) throws {
        guard sampleRate > 0, sampleRate <= Int(PA_RATE_MAX) else {
            throw PulseError.invalidArgument("recording rate \(sampleRate) Hz")
        }
        guard !connection.inMainloopThread else { throw PulseError.wrongThread }
        let (source, sourceMap) = try connection.recordableSource(source)
        self.connection = connection
        self.sampleRate = sampleRate
        channels = max(1, Int(sourceMap.channels))
        estimatedStart = PulseClock.monotonicSeconds()
        try connection.withLock {
            guard let context = connection.readyContextLocked() else {
                throw PulseError.notConnected("record \(source): not connected")
            }
            var spec = pa_sample_spec(format: nativeFloat32, rate: UInt32(sampleRate), channels: UInt8(channels))
            var map = sourceMap
            guard let stream = pa_stream_new(context, "interlude recorder", &spec, &map) else {
                throw PulseError.fromPulse(connection.contextErrnoLocked(context), "record \(source)")
            }
            self.stream = stream
            pa_stream_set_state_callback(stream, signalStateCallback, UnsafeMutableRawPointer(connection.mainloop))
            pa_stream_set_read_callback(stream, recorderReadCallback, Unmanaged.passUnretained(self).toOpaque())
            let max = UInt32.max
            let fragment = UInt32((Self.fragmentSeconds * Double(sampleRate)).rounded()) * UInt32(channels * MemoryLayout<Float>.size)
            var attr = pa_buffer_attr(maxlength: max, tlength: max, prebuf: max, minreq: max, fragsize: fragment)
            guard pa_stream_connect_record(stream, source, &attr, pa_stream_flags_t(rawValue: PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue | PA_STREAM_INTERPOLATE_TIMING.rawValue)) >= 0 else {
                let error = PulseError.fromPulse(connection.contextErrnoLocked(context), "record \(source)")
                stopLocked()
                throw error
            }
            let settled = connection.waitLocked(timeout: PulseConnection.operationTimeout) {
                pa_stream_get_state(stream) != PA_STREAM_CREATING
            }
            guard settled, pa_stream_get_state(stream) == PA_STREAM_READY else {
                let error = settled ? PulseError.fromPulse(connection.contextErrnoLocked(context), "record \(source)")
                                    : PulseError.timeout("record \(source): not ready within \(PulseConnection.operationTimeout) s")
                stopLocked()
                throw error
            }
            estimatedStart = PulseClock.monotonicSeconds()
        }
    }

    deinit { stop() }

    /// `CLOCK_MONOTONIC` seconds (``PulseClock/monotonicSeconds()``) at which the first recorded
    /// sample was played, so `startTime + i / sampleRate` is when sample `i` was heard.
    ///
    /// Estimated from the stream latency: at each read callback during the first 2 s, "now − the
    /// stream's recording time" (`pa_stream_get_time`, which corrects a monitor for its sink's
    /// latency); the median of those. Before any timing information, "now − duration read so far";
    /// before any sample, the time the stream became ready. Checked in the tests against a played
    /// sample's onset, which lands a few ms after the request (DESIGN.md measured 5.5 ms).
    public var startTime: Double { connection.withLock { estimatedStart } }

    /// Everything recorded so far, mono, full scale ±1.
    public func samples() -> [Float] { connection.withLock { recorded } }

    /// Stops recording (the samples stay readable). Idempotent.
    public func stop() { connection.withLock { stopLocked() } }

    private func stopLocked() {
        guard let stream else { return }
        self.stream = nil
        pa_stream_set_read_callback(stream, nil, nil)
        pa_stream_set_state_callback(stream, nil, nil)
        pa_stream_disconnect(stream)
        pa_stream_unref(stream)
    }

    /// Takes everything readable (mainloop thread).
    fileprivate func read(_ stream: OpaquePointer) {
        let now = PulseClock.monotonicSeconds()
        while pa_stream_readable_size(stream) > 0 {
            var data: UnsafeRawPointer?
            var length = 0
            guard pa_stream_peek(stream, &data, &length) >= 0, length > 0 else { break }
            let count = length / MemoryLayout<Float>.size
            let frames = count / channels
            if let data {
                let input = data.assumingMemoryBound(to: Float.self)
                if channels == 1 {
                    recorded.append(contentsOf: UnsafeBufferPointer(start: input, count: frames))
                } else {
                    // No reserveCapacity here: an exact reservation per chunk defeats the array's
                    // geometric growth and made a long recording quadratic (a minute of audio
                    // copied on every chunk).
                    let scale = 1 / Float(channels)
                    for frame in 0..<frames {
                        var sum: Float = 0
                        for channel in 0..<channels { sum += input[frame * channels + channel] }
                        recorded.append(sum * scale)
                    }
                }
            } else {
                recorded.append(contentsOf: repeatElement(0, count: frames))  // a hole in the stream
            }
            pa_stream_drop(stream)
        }
        let first = firstChunkTime ?? now
        if firstChunkTime == nil { firstChunkTime = now }
        guard now - first <= Self.settlingSeconds else { return }
        // libpulse's recording time: the server's write index plus transport and source latency,
        // minus the monitored sink's latency (a null sink renders up to ~10 ms ahead), interpolated
        // on CLOCK_MONOTONIC. Until timing info arrives, the end of what was read is taken as "now".
        var streamTime: pa_usec_t = 0
        if pa_stream_get_time(stream, &streamTime) >= 0 {
            estimates.append(PulseClock.monotonicSeconds() - Double(streamTime) / 1e6)
            let sorted = estimates.sorted()
            estimatedStart = sorted[sorted.count / 2]
        } else if estimates.isEmpty {
            estimatedStart = now - Double(recorded.count) / Double(sampleRate)
        }
    }
}

private let recorderReadCallback: pa_stream_request_cb_t = { stream, _, userdata in
    guard let stream, let userdata else { return }
    Unmanaged<PulseRecorder>.fromOpaque(userdata).takeUnretainedValue().read(stream)
}
