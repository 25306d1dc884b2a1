import CPulse

extension PulseConnection {
    /// The sample cache's limit per sample, bytes (POLICY.md S3; PulseAudio's `PA_SCACHE_ENTRY_SIZE_MAX`).
    public static let maxSampleBytes = 16 * 1024 * 1024

    /// The largest sample this server takes, bytes: 16 MiB on PulseAudio, which accepts a length up
    /// to and including `PA_SCACHE_ENTRY_SIZE_MAX`. pipewire-pulse (0.3.65) refuses a length of 16 MiB
    /// or more (`length >= SCACHE_ENTRY_SIZE_MAX`), so there the limit is 16 MiB − 1 byte: in whole
    /// frames, 16 MiB less one frame. ``uploadSample(name:pcm:sampleRate:channels:)`` refuses a larger
    /// sample itself, with the same `sampleTooLarge` on both servers.
    public var sampleCacheLimit: Int {
        serverKind == .pipeWire ? Self.maxSampleBytes - 1 : Self.maxSampleBytes
    }

    /// Uploads a sound to the server's sample cache (POLICY.md S3), replacing one of the same name.
    ///
    /// - Parameters:
    ///   - name: the cache entry's name.
    ///   - pcm: interleaved signed 16-bit samples.
    ///   - sampleRate: frames per second.
    ///   - channels: 1…32.
    /// - Throws: `sampleTooLarge` above ``sampleCacheLimit``, `invalidArgument` for an empty sample, a bad rate or
    ///   channel count or a length that is not a whole number of frames, `notConnected`, `timeout`,
    ///   `operationFailed`.
    public func uploadSample(name: String, pcm: [Int16], sampleRate: Int, channels: Int) throws {
        let bytes = pcm.count * MemoryLayout<Int16>.size
        let limit = sampleCacheLimit
        guard bytes <= limit else {
            throw PulseError.sampleTooLarge("sample \(name): \(bytes) bytes, the cache takes at most \(limit)")
        }
        guard !pcm.isEmpty, (1...Int(PA_CHANNELS_MAX)).contains(channels), pcm.count % channels == 0,
              sampleRate > 0, sampleRate <= Int(PA_RATE_MAX)
        else {
            throw PulseError.invalidArgument(
                "sample \(name): \(pcm.count) samples, \(channels) channels, \(sampleRate) Hz")
        }
        guard !inMainloopThread else { throw PulseError.wrongThread }
        try withLock {
            guard let context = readyContextLocked() else { throw PulseError.notConnected("upload \(name): not connected") }
            var spec = pa_sample_spec(format: nativeS16, rate: UInt32(sampleRate), channels: UInt8(channels))
            var map = pa_channel_map()
            pa_channel_map_init_extend(&map, UInt32(channels), PA_CHANNEL_MAP_DEFAULT)
            guard let stream = pa_stream_new(context, name, &spec, &map) else {
                throw PulseError.fromPulse(contextErrnoLocked(context), "upload \(name)")
            }
            defer {
                pa_stream_set_state_callback(stream, nil, nil)
                pa_stream_unref(stream)
            }
            pa_stream_set_state_callback(stream, signalStateCallback, UnsafeMutableRawPointer(mainloop))
            func fail(_ what: String) -> PulseError {
                PulseError.fromPulse(contextErrnoLocked(context), "upload \(name): \(what)")
            }
            guard pa_stream_connect_upload(stream, bytes) >= 0 else { throw fail("connect") }
            let state = { pa_stream_get_state(stream) }
            guard waitLocked(timeout: Self.operationTimeout, until: { state() != PA_STREAM_CREATING }) else {
                pa_stream_disconnect(stream)
                throw PulseError.timeout("upload \(name): the server did not accept the upload")
            }
            guard state() == PA_STREAM_READY else { throw fail("connect") }
            let written = pcm.withUnsafeBytes { pa_stream_write(stream, $0.baseAddress, bytes, nil, 0, PA_SEEK_RELATIVE) }
            guard written >= 0 else {
                pa_stream_disconnect(stream)
                throw fail("write")
            }
            guard pa_stream_finish_upload(stream) >= 0 else { throw fail("finish") }
            guard waitLocked(timeout: Self.operationTimeout, until: { state() != PA_STREAM_READY }) else {
                pa_stream_disconnect(stream)
                throw PulseError.timeout("upload \(name): the server did not confirm the upload")
            }
            guard state() == PA_STREAM_TERMINATED else { throw fail("finish") }
            if serverKindLocked == .pipeWire {
                samplePCM[name] = CachedPCM(samples: pcm, sampleRate: sampleRate, channels: channels)
            }
        }
    }

    /// Removes a sample from the cache.
    /// - Throws: `noSuchEntity` if there is none by that name, `notConnected`, `timeout`.
    public func removeSample(name: String) throws {
        try perform("remove sample \(name)", { context, userdata in
            pa_context_remove_sample(context, name, contextSuccessCallback, userdata)
        }, result: { _ in })
        withLock { samplePCM[name] = nil }
    }

    /// Plays a cached sample on the default sink (`pa_context_play_sample_with_proplist`).
    ///
    /// On PipeWire a sample this connection uploaded plays through a stream of the adapter's own
    /// (``SamplePlayback``), with `volume` applied to its samples, because pipewire-pulse (0.3.65)
    /// differs in two ways that matter here: it reads the volume of a play-sample request and ignores
    /// it (the sample plays at full volume), and the sink input it makes for the sample cannot be
    /// changed by the client that played it (a volume or mute request for it from this connection is
    /// never answered; from another client it is). An own stream plays at its volume from the first
    /// sample and stays an ordinary sink input that the daemon can duck or mute. A sample uploaded by
    /// another client is played with play-sample, whose volume pipewire-pulse ignores.
    ///
    /// - Parameters:
    ///   - name: the cache entry.
    ///   - volume: linear amplitude 0…1 (`pa_sw_volume_from_linear`; 0.2 is −14 dB).
    ///   - properties: the sink input's properties, e.g. `media.role=event`, `event.id` (DESIGN.md).
    /// - Returns: the index of the new sink input.
    /// - Throws: `noSuchEntity` if no such sample, `invalidArgument` for a volume outside 0…1 or a bad
    ///   property key, `notConnected`, `timeout`.
    public func playSample(name: String, volume: Double, properties: [String: String]) throws -> UInt32 {
        guard volume >= 0, volume <= 1 else {
            throw PulseError.invalidArgument("play \(name): volume \(volume) is outside 0…1")
        }
        if let pcm = withLock({ samplePCM[name] }) {
            return try SamplePlayback.start(connection: self, name: name, pcm: pcm, volume: volume, properties: properties)
        }
        let list = try makeProplist(properties)
        defer { pa_proplist_free(list) }
        return try perform("play sample \(name)", { context, userdata in
            pa_context_play_sample_with_proplist(context, name, nil, pa_sw_volume_from_linear(volume), list,
                                                 playSampleCallback, userdata)
        }, result: { $0.index })
    }
}

/// Signed 16-bit in this machine's byte order (`PA_SAMPLE_S16NE` is a macro that does not import).
let nativeS16: pa_sample_format_t = 1.littleEndian == 1 ? PA_SAMPLE_S16LE : PA_SAMPLE_S16BE
/// 32-bit float in this machine's byte order (`PA_SAMPLE_FLOAT32NE`).
let nativeFloat32: pa_sample_format_t = 1.littleEndian == 1 ? PA_SAMPLE_FLOAT32LE : PA_SAMPLE_FLOAT32BE

/// A stream state callback that only wakes the waiters; userdata is the `pa_threaded_mainloop`.
let signalStateCallback: pa_stream_notify_cb_t = { _, userdata in
    if let userdata { pa_threaded_mainloop_signal(OpaquePointer(userdata), 0) }
}
