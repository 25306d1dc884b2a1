import CPulse

/// A sample's interleaved signed 16-bit PCM, as uploaded (kept by the adapter on PipeWire).
struct CachedPCM: Sendable {
    var samples: [Int16]
    var sampleRate: Int
    var channels: Int
}

/// A cached sample played once through a playback stream of the adapter's own: how
/// ``PulseConnection/playSample(name:volume:properties:)`` plays on PipeWire, where play-sample
/// ignores its volume and leaves a sink input its client cannot change (see there).
///
/// The volume is applied to the samples as they are written (a software gain), not as the stream's
/// volume: pipewire-pulse 0.3.65 also ignores the volume a playback stream is created with
/// (measured: `paplay --volume=13107`, 20 %, plays at full scale and its sink input reads 100 %), and
/// a volume set after creation would come a round trip after the first samples. So the sound is at
/// its volume from the first sample; its sink input reads 0 dB, and a gain the daemon applies later
/// (a duck, a mute) acts on top as on any stream.
///
/// The stream is fed from its write callback on the mainloop thread, drained when everything is
/// written, then disconnected. The connection keeps it alive until then (`samplePlaybacks`). All
/// state is under the mainloop lock.
final class SamplePlayback: @unchecked Sendable {
    private unowned(unsafe) let connection: PulseConnection
    private let pcm: CachedPCM
    private let bytesPerFrame: Int
    /// Linear gain applied to the samples (the requested volume).
    private let gain: Float
    private var stream: OpaquePointer?
    private var position = 0
    private var draining = false
    /// Set once `start` has handed the stream over to the callbacks (then they clean up).
    private var running = false

    /// Target buffer, seconds (the same as ``PulsePlaybackStream``'s default).
    static let latency = 0.05

    private init(connection: PulseConnection, pcm: CachedPCM, gain: Float) {
        self.connection = connection
        self.pcm = pcm
        self.gain = gain
        bytesPerFrame = pcm.channels * MemoryLayout<Int16>.size
    }

    /// Creates the stream, connected and playing at `volume` (linear); returns its sink input index once the
    /// server has created it (the same moment a play-sample request answers).
    static func start(connection: PulseConnection, name: String, pcm: CachedPCM, volume: Double,
                      properties: [String: String]) throws -> UInt32 {
        guard !connection.inMainloopThread else { throw PulseError.wrongThread }
        let list = try makeProplist(properties)
        defer { pa_proplist_free(list) }
        return try connection.withLock {
            guard let context = connection.readyContextLocked() else {
                throw PulseError.notConnected("play sample \(name): not connected")
            }
            var spec = pa_sample_spec(format: nativeS16, rate: UInt32(pcm.sampleRate), channels: UInt8(pcm.channels))
            var map = pa_channel_map()
            pa_channel_map_init_extend(&map, UInt32(pcm.channels), PA_CHANNEL_MAP_DEFAULT)
            guard let stream = pa_stream_new_with_proplist(context, name, &spec, &map, list) else {
                throw PulseError.fromPulse(connection.contextErrnoLocked(context), "play sample \(name)")
            }
            let me = SamplePlayback(connection: connection, pcm: pcm, gain: Float(volume))
            me.stream = stream
            connection.samplePlaybacks[ObjectIdentifier(me)] = me
            let userdata = Unmanaged.passUnretained(me).toOpaque()
            pa_stream_set_state_callback(stream, samplePlaybackStateCallback, userdata)
            pa_stream_set_write_callback(stream, samplePlaybackWriteCallback, userdata)
            let max = UInt32.max
            let target = UInt32((latency * Double(pcm.sampleRate)).rounded()) * UInt32(me.bytesPerFrame)
            var attr = pa_buffer_attr(maxlength: max, tlength: target, prebuf: max, minreq: max, fragsize: max)
            guard pa_stream_connect_playback(stream, nil, &attr, PA_STREAM_ADJUST_LATENCY, nil, nil) >= 0 else {
                let error = PulseError.fromPulse(connection.contextErrnoLocked(context), "play sample \(name)")
                me.finishLocked()
                throw error
            }
            let settled = connection.waitLocked(timeout: PulseConnection.operationTimeout) {
                pa_stream_get_state(stream) != PA_STREAM_CREATING
            }
            guard settled, pa_stream_get_state(stream) == PA_STREAM_READY else {
                let error = settled ? PulseError.fromPulse(connection.contextErrnoLocked(context), "play sample \(name)")
                                    : PulseError.timeout("play sample \(name): not ready within \(PulseConnection.operationTimeout) s")
                me.finishLocked()
                throw error
            }
            me.running = true
            return pa_stream_get_index(stream)
        }
    }

    /// Fills what the server asks for; after the last frame, drains (mainloop thread).
    fileprivate func write(_ stream: OpaquePointer, _ requested: Int) {
        let total = pcm.samples.count / pcm.channels
        var frames = min(requested / bytesPerFrame, total - position)
        var data: UnsafeMutableRawPointer?
        var length = frames * bytesPerFrame
        if frames > 0, pa_stream_begin_write(stream, &data, &length) >= 0, let data {
            frames = min(frames, length / bytesPerFrame)
            let count = frames * pcm.channels
            let out = data.bindMemory(to: Int16.self, capacity: count)
            let first = position * pcm.channels
            pcm.samples.withUnsafeBufferPointer { input in
                if gain == 1 {
                    out.update(from: input.baseAddress! + first, count: count)
                } else {
                    for i in 0..<count { out[i] = Int16((Float(input[first + i]) * gain).rounded()) }
                }
            }
            pa_stream_write(stream, data, frames * bytesPerFrame, nil, 0, PA_SEEK_RELATIVE)
            position += frames
        }
        if position == total && !draining {
            draining = true
            let userdata = Unmanaged.passUnretained(self).toOpaque()
            if let op = pa_stream_drain(stream, samplePlaybackDrainCallback, userdata) { pa_operation_unref(op) }
        }
    }

    /// The stream changed state (mainloop thread): wakes `start`; cleans up once it has failed or
    /// ended after `start` returned.
    fileprivate func stateChanged(_ stream: OpaquePointer) {
        pa_threaded_mainloop_signal(connection.mainloop, 0)
        let state = pa_stream_get_state(stream)
        if running && (state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED) { finishLocked() }
    }

    /// Disconnects and forgets the stream (lock held). Idempotent.
    fileprivate func finishLocked() {
        guard let stream else { return }
        self.stream = nil
        pa_stream_set_write_callback(stream, nil, nil)
        pa_stream_set_state_callback(stream, nil, nil)
        pa_stream_disconnect(stream)
        pa_stream_unref(stream)
        withExtendedLifetime(self) { connection.samplePlaybacks[ObjectIdentifier(self)] = nil }
    }
}

// Callbacks: file scope, nonisolated (DESIGN.md "Swift 6 callback trap"); mainloop thread, lock held.

private func playback(_ userdata: UnsafeMutableRawPointer?) -> SamplePlayback? {
    userdata.map { Unmanaged<SamplePlayback>.fromOpaque($0).takeUnretainedValue() }
}

private let samplePlaybackWriteCallback: pa_stream_request_cb_t = { stream, requested, userdata in
    guard let stream, let me = playback(userdata) else { return }
    me.write(stream, requested)
}

private let samplePlaybackStateCallback: pa_stream_notify_cb_t = { stream, userdata in
    guard let stream, let me = playback(userdata) else { return }
    me.stateChanged(stream)
}

private let samplePlaybackDrainCallback: pa_stream_success_cb_t = { _, _, userdata in
    playback(userdata)?.finishLocked()
}
