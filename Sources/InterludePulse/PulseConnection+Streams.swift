import CPulse

extension PulseConnection {
    /// Every sink input on the server, described as in ``PulseEvent`` (with the adapter's gains).
    /// - Throws: `notConnected`, `timeout`, `operationFailed`, `wrongThread`.
    public func sinkInputs() throws -> [PulseSinkInput] {
        let pids = try perform("list clients", { context, userdata in
            pa_context_get_client_info_list(context, clientListCallback, userdata)
        }, result: { $0.clientPIDs })
        return try perform("list sink inputs", { context, userdata in
            clientPIDs.merge(pids) { _, new in new }  // the lock is held here
            return pa_context_get_sink_input_info_list(context, sinkInputListCallback, userdata)
        }, result: { $0.sinkInputs.map(\.input) })
    }

    /// One sink input, described now.
    func describeSinkInput(_ index: UInt32) async throws -> SinkInputSnapshot {
        try await performAsync("describe sink input \(index)", { context, userdata in
            pa_context_get_sink_input_info(context, index, sinkInputListCallback, userdata)
        }, result: { box in
            guard let first = box.sinkInputs.first else { throw PulseError.noSuchEntity("no sink input \(index)") }
            return first
        })
    }

    /// Applies `gainDb` on top of the user's volume of a sink input, ramped (POLICY.md A2, A7).
    ///
    /// The volume written is `user volume × gain` per channel (`pa_sw_volume_multiply`). The gain
    /// moves from its current value (0 dB if the adapter never touched this sink input) to `gainDb`
    /// in equal dB steps of at most `maxStepDb`, written at most `stepSeconds` apart and spread over
    /// `duration` seconds: the first step is written at once, the last at `duration`. `duration` 0
    /// is a single write (a step change, whatever its size). Returns once the last write is
    /// acknowledged by the server, so the caller can reply "duck done" (A11).
    ///
    /// A newer call for the same sink input supersedes a running ramp, which then returns early
    /// without error; the newer ramp starts from wherever the gain got to. A volume change the
    /// adapter did not write is the user's: it becomes the new user volume and the gain is re-applied
    /// on top (A7: a duck is a limit, never a snapshot).
    ///
    /// - Parameters:
    ///   - sinkInput: the sink input's index.
    ///   - gainDb: the target gain in dB (0 = none; −14 = the A2 duck level; −200 or less = silent).
    ///   - duration: seconds the ramp takes (A2 defaults: 0.3 down, 0.5 up, from `Config/`).
    ///   - stepSeconds: most seconds between two writes (DESIGN.md: every ~10–20 ms).
    ///   - maxStepDb: largest change of one write in dB.
    /// - Throws: `noSuchEntity` if the sink input does not exist or vanishes during the ramp,
    ///   `invalidArgument` for a NaN gain or a non-positive step, `notConnected` (also when the server
    ///   goes away during the ramp), `CancellationError` if the calling task is cancelled (the gain
    ///   stays where the ramp got to).
    public func rampGain(sinkInput: UInt32, toDb gainDb: Double, duration: Double, stepSeconds: Double = 0.015,
                         maxStepDb: Double = 1.5) async throws {
        guard !gainDb.isNaN, duration.isFinite, duration >= 0, stepSeconds > 0, maxStepDb > 0 else {
            throw PulseError.invalidArgument(
                "rampGain: gain \(gainDb) dB, duration \(duration) s, step \(stepSeconds) s, max step \(maxStepDb) dB")
        }
        let target = max(gainDb, silenceDb)
        if withLock({ gains[sinkInput] == nil }) {
            let now = try await describeSinkInput(sinkInput)
            withLock {
                if gains[sinkInput] == nil {
                    let user = Self.initialUserVolume(reported: now.volumes)
                    gains[sinkInput] = GainState(user: user, gainDb: 0, lastConfirmed: now.volumes, generation: 0)
                    userVolumeObserver?(sinkInput, user)  // before the first write of a gain
                }
            }
        }
        let (generation, start): (Int, Double) = try withLock {
            guard var gain = gains[sinkInput] else { throw PulseError.noSuchEntity("no sink input \(sinkInput)") }
            gain.generation += 1
            gains[sinkInput] = gain
            return (gain.generation, gain.gainDb)
        }
        let change = target - start
        var steps = 1
        if duration > 0 && abs(change) > 1e-9 {
            steps = max(Int((duration / stepSeconds).rounded(.up)) + 1, Int((abs(change) / maxStepDb).rounded(.up)), 2)
        }
        let clock = ContinuousClock()
        let begin = clock.now
        for k in 1...steps {
            if k > 1 {
                let at = duration * Double(k - 1) / Double(steps - 1)
                try await Task.sleep(until: begin + .nanoseconds(Int64(at * 1e9)), clock: clock)
            }
            let value = k == steps ? target : start + change * Double(k) / Double(steps)
            let superseded = try await writeGainStep(sinkInput, generation: generation, gainDb: value)
            if superseded { return }
        }
    }

    /// The gain (dB) the adapter applies on top of a sink input's user volume now; nil if none.
    public func appliedGain(sinkInput: UInt32) -> Double? { withLock { gains[sinkInput]?.gainDb } }

    /// Takes over a gain a previous run of the daemon left on a sink input (it was killed during a
    /// duck): the sink input's volume is then `user × gain`, so the user's volume is the volume
    /// divided by the gain (A7). A later ``rampGain(sinkInput:toDb:duration:stepSeconds:maxStepDb:)``
    /// to 0 dB puts the user's volume back. Does nothing if the adapter already tracks the sink input.
    /// - Parameter gainDb: the gain left on it, dB (negative: a duck).
    /// - Throws: `noSuchEntity`, `notConnected`, `timeout`.
    public func adoptGain(sinkInput: UInt32, gainDb: Double) async throws {
        guard gainDb.isFinite, gainDb < 0, withLock({ gains[sinkInput] == nil }) else { return }
        let now = try await describeSinkInput(sinkInput)
        let undo = volumeFromDb(-gainDb)
        withLock {
            guard gains[sinkInput] == nil else { return }
            let user = now.volumes.map { pa_volume_t(min(UInt64(pa_sw_volume_multiply($0, undo)), UInt64(PA_VOLUME_MAX))) }
            gains[sinkInput] = GainState(user: user, gainDb: gainDb, lastConfirmed: now.volumes, generation: 0)
        }
    }

    /// The user's volume of a sink input (raw `pa_volume_t` per channel, 65536 = 100 %) as the
    /// adapter tracks it under its gain (A7); nil if the adapter applies no gain to it.
    public func userVolume(sinkInput: UInt32) -> [UInt32]? { withLock { gains[sinkInput]?.user } }

    /// Sets the function told the user's volume of a sink input (raw per channel, as
    /// ``userVolume(sinkInput:)``) each time the adapter starts to track one (before it first writes
    /// a gain on it) and each time it sees the user change it under a gain (A7). The function runs
    /// on the mainloop thread with the connection's lock held: it must not call back into the
    /// connection, and should be quick (the daemon writes its gain ledger there, so that the
    /// ledger holds the user's volume before any write of a gain can reach the server).
    public func observeUserVolumes(_ observer: @escaping @Sendable (_ sinkInput: UInt32, _ user: [UInt32]) -> Void) {
        withLock { userVolumeObserver = observer }
    }

    /// Takes over a sink input an earlier run of the daemon left under a gain, knowing the user's
    /// volume it recorded (A7): if the volume now is `user × g` for one gain `g` ≤ 0 dB on every
    /// channel (within 0.5 dB; silence counts as any `g`), the adapter tracks `user` as the user's
    /// volume with `g` applied, and a later ramp to 0 dB writes `user` back exactly, wherever a ramp
    /// the earlier run was killed in got to. Otherwise (someone changed the volume since: louder
    /// than `user`, or channels no longer in the same ratio) the volume now is the user's and
    /// nothing is taken over. Does nothing if the adapter already tracks the sink input.
    /// - Parameter user: the recorded user volume, raw per channel.
    /// - Returns: whether the sink input was taken over.
    /// - Throws: `noSuchEntity`, `notConnected`, `timeout`.
    public func adoptUserVolume(sinkInput: UInt32, user: [UInt32]) async throws -> Bool {
        guard !user.isEmpty, withLock({ gains[sinkInput] == nil }) else { return false }
        let now = try await describeSinkInput(sinkInput)
        guard let gainDb = Self.commonGain(volumes: now.volumes, user: user) else { return false }
        return withLock {
            guard gains[sinkInput] == nil else { return false }
            gains[sinkInput] = GainState(user: user, gainDb: gainDb, lastConfirmed: now.volumes, generation: 0)
            return true
        }
    }

    /// The gain (dB, ≤ 0) that makes `user` into `volumes` on every channel, or nil if there is none
    /// (channel counts differ, a channel is louder than the user's by more than 0.05 dB, or two
    /// channels differ in gain by more than 0.5 dB). All-silent `volumes` give ``silenceDb``.
    static func commonGain(volumes: [pa_volume_t], user: [pa_volume_t]) -> Double? {
        guard volumes.count == user.count, !user.isEmpty else { return nil }
        if volumes.allSatisfy({ $0 == 0 }) { return silenceDb }
        var gains: [Double] = []
        for (v, u) in zip(volumes, user) {
            if u == 0 { if v == 0 { continue } else { return nil } }
            if v == 0 { return nil }
            gains.append(volumeToDb(v) - volumeToDb(u))
        }
        guard let low = gains.min(), let high = gains.max(), high <= 0.05, high - low <= 0.5 else { return gains.isEmpty ? 0 : nil }
        return min(gains.reduce(0, +) / Double(gains.count), 0)
    }

    /// The user's volume of a sink input the adapter has not touched yet, from the volume the server
    /// reports (per channel). pipewire-pulse reports a just-created stream at volume 0 until it is
    /// linked (seen: a prompt opened during a call stayed silent, user 0 × gain); a stream is not
    /// created at volume 0 on purpose (that is what mute is for), so an all-zero volume means "not
    /// set yet" and the user's volume is 100 % (README "PipeWire").
    static func initialUserVolume(reported: [pa_volume_t]) -> [pa_volume_t] {
        guard !reported.isEmpty, reported.allSatisfy({ $0 == 0 }) else { return reported }
        return [pa_volume_t](repeating: pa_volume_t(PA_VOLUME_NORM), count: reported.count)
    }

    /// Sets the gain and writes `user × gain`, unless a newer ramp has started (then returns true).
    ///
    /// Reads the sink input's volume just before writing (A7): a volume the adapter did not write is
    /// the user's and becomes the base of this and later steps. Change events alone can miss it: the
    /// event for a foreign write is answered with the volume as it is when the event's info request
    /// is served, and if the next step of the ramp has been written by then, the foreign volume is
    /// gone without a trace. Seen on PipeWire on this busy 2-core machine (about 1 run in 40 of the
    /// mid-ramp A7 test): a user write delayed ~15 ms landed just before the ramp's next step, and
    /// no event ever showed it. A read right before each write narrows that window to one round trip.
    private func writeGainStep(_ index: UInt32, generation: Int, gainDb: Double) async throws -> Bool {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, Error>) in
            withLock {
                guard readyContextLocked() != nil else {
                    continuation.resume(throwing: PulseError.notConnected("the connection went away during the ramp"))
                    return
                }
                guard let gain = gains[index] else {
                    continuation.resume(throwing: PulseError.noSuchEntity("sink input \(index) went away during the ramp"))
                    return
                }
                guard gain.generation == generation else {
                    continuation.resume(returning: true)
                    return
                }
                do {
                    _ = try startLocked("read sink input \(index) before a gain step", prepare: { box in
                        box.onFinish = { box in
                            // Mainloop thread, lock held: nothing can be written between here and the write below.
                            let connection = box.connection
                            do { try box.check() } catch {
                                continuation.resume(throwing: error)
                                return
                            }
                            if let now = box.sinkInputs.first { connection.adoptUserVolumeLocked(index, now.volumes) }
                            guard var gain = connection.gains[index] else {
                                continuation.resume(throwing: PulseError.noSuchEntity("sink input \(index) went away during the ramp"))
                                return
                            }
                            guard gain.generation == generation else {
                                continuation.resume(returning: true)
                                return
                            }
                            gain.gainDb = gainDb
                            connection.gains[index] = gain
                            connection.writeVolumeLocked(index, applyGain(gain.user, gainDb: gainDb)) { outcome in
                                continuation.resume(with: outcome.map { false })
                            }
                        }
                    }) { context, userdata in
                        pa_context_get_sink_input_info(context, index, sinkInputListCallback, userdata)
                    }
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Mutes or unmutes a sink input (`pa_context_set_sink_input_mute`); A8 enforcement, A12.
    /// - Throws: `noSuchEntity`, `notConnected`.
    public func setMute(sinkInput: UInt32, _ mute: Bool) async throws {
        try await performAsync("set mute of sink input \(sinkInput)", { context, userdata in
            pa_context_set_sink_input_mute(context, sinkInput, mute ? 1 : 0, contextSuccessCallback, userdata)
        }, result: { _ in })
    }

    /// Sets a sink input's volume to `db` on every channel the way a mixer would: the adapter does
    /// not mark the write as its own, so if it applies a gain it treats `db` as the user's new volume
    /// and re-applies the gain on top moments later (A7). For tests and the scenario `volume` step.
    /// - Throws: `noSuchEntity`, `invalidArgument` (NaN), `notConnected`.
    public func setUserVolume(sinkInput: UInt32, db: Double) async throws {
        guard !db.isNaN else { throw PulseError.invalidArgument("setUserVolume: NaN dB") }
        let channels = try await describeSinkInput(sinkInput).volumes.count
        try await performAsync("set volume of sink input \(sinkInput)", { context, userdata in
            var cv = pa_cvolume()
            pa_cvolume_set(&cv, UInt32(max(channels, 1)), volumeFromDb(db))
            return pa_context_set_sink_input_volume(context, sinkInput, &cv, contextSuccessCallback, userdata)
        }, result: { _ in })
    }

    // MARK: Sinks

    /// The source to record for `name` and its channel map (`pa_context_get_source_info_by_name`).
    ///
    /// A name `SINK.monitor` that is not a source's name is looked up as the monitor of sink `SINK`
    /// (`monitor_source_name`): PulseAudio and pipewire-pulse both call a monitor `SINK.monitor`, but
    /// the sink's own answer is the one to trust. An unknown name is an error here, before any stream
    /// exists: pipewire-pulse would otherwise connect a record stream for an unknown source to the
    /// default source instead of failing as PulseAudio does.
    /// - Throws: `noSuchEntity`, `notConnected`, `timeout`.
    func recordableSource(_ name: String) throws -> (name: String, map: pa_channel_map) {
        func lookup(_ source: String) throws -> pa_channel_map {
            try perform("get source \(source)", { context, userdata in
                pa_context_get_source_info_by_name(context, source, sourceInfoCallback, userdata)
            }, result: { box in
                guard box.found, let map = box.channelMap else { throw PulseError.noSuchEntity("no source \(source)") }
                return map
            })
        }
        do {
            return (name, try lookup(name))
        } catch let error as PulseError where error.code == "noSuchEntity" && name.hasSuffix(".monitor") {
            let sink = String(name.dropLast(".monitor".count))
            let monitor: String
            do {
                monitor = try perform("get sink \(sink)", { context, userdata in
                    pa_context_get_sink_info_by_name(context, sink, sinkInfoCallback, userdata)
                }, result: { box in
                    guard box.found, let monitor = box.text, !monitor.isEmpty, monitor != name else { throw error }
                    return monitor
                })
            } catch let inner as PulseError where inner.code == "noSuchEntity" {
                throw error
            }
            return (monitor, try lookup(monitor))
        }
    }

    /// The server's default sink name (`pa_context_get_server_info`).
    /// - Throws: `noSuchEntity` if the server has none, `notConnected`, `timeout`.
    public func defaultSinkName() throws -> String { try perform(.defaultSinkName) }

    /// ``defaultSinkName()`` without blocking a thread, for async code (issue 9: no blocking
    /// PulseAudio call from Swift's pool).
    public func defaultSinkNameAsync() async throws -> String { try await performAsync(.defaultSinkName) }

    /// Whether a sink (an output) is muted. For critical sounds through a muted output (N3).
    /// - Throws: `noSuchEntity`, `notConnected`, `timeout`.
    public func sinkMuted(_ sink: String) throws -> Bool { try perform(.sinkMuted(sink)) }

    /// ``sinkMuted(_:)`` without blocking a thread, for async code.
    public func sinkMutedAsync(_ sink: String) async throws -> Bool { try await performAsync(.sinkMuted(sink)) }

    /// Mutes or unmutes a sink (`pa_context_set_sink_mute_by_name`): N3 unmutes the output for a
    /// critical sound's length, then restores it.
    /// - Throws: `noSuchEntity`, `notConnected`, `timeout`.
    public func setSinkMute(_ sink: String, _ mute: Bool) throws { try perform(.setSinkMute(sink, mute)) }

    /// ``setSinkMute(_:_:)`` without blocking a thread, for async code.
    public func setSinkMuteAsync(_ sink: String, _ mute: Bool) async throws { try await performAsync(.setSinkMute(sink, mute)) }
}

/// One server operation as ``PulseConnection/perform(_:)`` (blocking) and
/// ``PulseConnection/performAsync(_:)`` (suspending) both issue it: what it is called in errors,
/// how it is issued and how its result is read, written once for both.
struct PulseRequest<R: Sendable>: Sendable {
    let what: String
    let issue: @Sendable (OpaquePointer, UnsafeMutableRawPointer) -> OpaquePointer?
    let result: @Sendable (Operation) throws -> R
}

extension PulseRequest where R == String {
    /// The server's default sink name.
    static var defaultSinkName: PulseRequest {
        PulseRequest(what: "get server info", issue: { context, userdata in
            pa_context_get_server_info(context, serverInfoCallback, userdata)
        }, result: { box in
            guard let name = box.text, !name.isEmpty else { throw PulseError.noSuchEntity("the server has no default sink") }
            return name
        })
    }
}

extension PulseRequest where R == Bool {
    /// Whether `sink` is muted.
    static func sinkMuted(_ sink: String) -> PulseRequest {
        PulseRequest(what: "get sink \(sink)", issue: { context, userdata in
            pa_context_get_sink_info_by_name(context, sink, sinkInfoCallback, userdata)
        }, result: { box in
            guard box.found else { throw PulseError.noSuchEntity("no sink \(sink)") }
            return box.flag
        })
    }
}

extension PulseRequest where R == Void {
    /// Mutes or unmutes `sink`.
    static func setSinkMute(_ sink: String, _ mute: Bool) -> PulseRequest {
        PulseRequest(what: "set mute of sink \(sink)", issue: { context, userdata in
            pa_context_set_sink_mute_by_name(context, sink, mute ? 1 : 0, contextSuccessCallback, userdata)
        }, result: { _ in })
    }
}

extension PulseConnection {
    func perform<R>(_ r: PulseRequest<R>) throws -> R { try perform(r.what, r.issue, result: r.result) }
    func performAsync<R>(_ r: PulseRequest<R>) async throws -> R { try await performAsync(r.what, r.issue, result: r.result) }
}
