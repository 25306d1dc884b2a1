import Foundation
import Testing
import InterludePulse
import InterludeScenario

/// The adapter against a real private PulseAudio server (started by Scripts/test-pulse); every audio
/// claim is checked in a recording of the null sink's monitor. Each test uses its own tone frequency
/// and closes its streams; the suite is serialized because all tests share one sink.
@Suite(.serialized) struct PulseAdapterTests {
    static func isChange(_ event: PulseEvent, of index: UInt32, _ match: (PulseSinkInput) -> Bool) -> Bool {
        if case let .sinkInputChanged(input) = event, input.index == index { return match(input) }
        return false
    }

    @Test("a 440 Hz stream at amplitude 0.25 records at 0 dB")
    func sineLevel() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let capture = try Capture(pulse)
        let stream = try tone(pulse, 440)
        defer { stream.close() }
        let level = await capture.level(440, at: now() + 0.5)
        print("[measured] 440 Hz stream: \(level) dB")
        #expect(abs(level) <= 1)
    }

    @Test("A2: rampGain to −14 dB over 300 ms records −14 dB, moving ≤ 1.5 dB per write; back to 0 restores 0 dB")
    func rampDownAndUp() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let log = EventLog(pulse)
        let capture = try Capture(pulse)
        let stream = try tone(pulse, 440)
        defer { stream.close() }
        let index = stream.sinkInputIndex
        await sleep(0.4)
        let before = await capture.level(440, at: now() - 0.1)

        let mark = log.all.count
        let t0 = now()
        try await pulse.rampGain(sinkInput: index, toDb: -14, duration: 0.3)
        let t1 = now()
        let last = await log.wait(from: mark) { Self.isChange($0, of: index) { abs($0.volumeDb + 14) < 0.05 } }
        #expect(last != nil, "no change event reached −14 dB")
        let written = [0.0] + log.changes(of: index, from: mark).map(\.volumeDb)
        let steps = zip(written, written.dropFirst()).map { abs($1 - $0) }
        let ducked = await capture.level(440, at: t1 + 0.3)
        let during = await capture.levels(440, from: t0, to: t1 + 0.1)
        let recordedSteps = zip(during, during.dropFirst()).map { abs($1 - $0) }
        print("[measured] ramp 0 → −14 dB took \(String(format: "%.3f", t1 - t0)) s, \(written.count - 1) volume changes seen, "
              + "largest \(String(format: "%.2f", steps.max() ?? 0)) dB; level before \(before) dB, after \(ducked) dB; "
              + "largest change between 20 ms windows in the recording \(String(format: "%.2f", recordedSteps.max() ?? 0)) dB")
        #expect(abs(before) <= 1)
        #expect(t1 - t0 >= 0.28 && t1 - t0 < 0.6)
        #expect(written.count >= 15)
        #expect((steps.max() ?? 99) <= 1.5)
        #expect(abs(ducked + 14) <= 1.5)
        // PipeWire applies volume writes at its quantum boundaries: after a scheduling hiccup two or
        // three of our ≤ 0.7 dB writes land in one 20 ms window (3.0 dB seen once in a CI pass, 1.1 dB
        // the run before). A step, the fault this guards against, is 14 dB and shows as ≥ 7 dB.
        let recordedBound = ProcessInfo.processInfo.environment["INTERLUDE_AUDIO_SERVER"] == "pipewire" ? 4.0 : 2.0
        #expect((recordedSteps.max() ?? 99) <= recordedBound, "the recording shows a step, not a ramp")
        if case let .sinkInputChanged(input)? = last {
            #expect(abs(input.gainDb + 14) < 0.01)
            #expect(abs(input.userVolumeDb) < 0.05)
        }

        let t2 = now()
        try await pulse.rampGain(sinkInput: index, toDb: 0, duration: 0.5)
        let t3 = now()
        let restored = await capture.level(440, at: t3 + 0.3)
        print("[measured] ramp −14 → 0 dB took \(String(format: "%.3f", t3 - t2)) s; level after \(restored) dB")
        #expect(t3 - t2 >= 0.48 && t3 - t2 < 0.8)
        #expect(abs(restored) <= 1)
    }

    @Test("A7: a user volume of −6 dB set during a −14 dB duck is kept: −20 dB while ducked, −6 dB after")
    func userVolumeDuringDuck() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let log = EventLog(pulse)
        let capture = try Capture(pulse)
        let stream = try tone(pulse, 550)
        defer { stream.close() }
        let index = stream.sinkInputIndex
        try await pulse.rampGain(sinkInput: index, toDb: -14, duration: 0)
        await sleep(0.3)
        let ducked = await capture.level(550, at: now() - 0.1)

        let mark = log.all.count
        try await pulse.setUserVolume(sinkInput: index, db: -6)
        let reapplied = await log.wait(from: mark) {
            Self.isChange($0, of: index) { abs($0.volumeDb + 20) < 0.05 && abs($0.userVolumeDb + 6) < 0.05 && abs($0.gainDb + 14) < 0.01 }
        }
        #expect(reapplied != nil, "the gain was not re-applied on top of the user's −6 dB: \(log.changes(of: index, from: mark))")
        let underUser = await capture.level(550, at: now() + 0.2)

        try await pulse.rampGain(sinkInput: index, toDb: 0, duration: 0.3)
        let released = await capture.level(550, at: now() + 0.3)
        let final = try pulse.sinkInputs().first { $0.index == index }
        print("[measured] A7: ducked \(ducked) dB; user −6 dB under the duck \(underUser) dB; after the duck \(released) dB")
        #expect(abs(ducked + 14) <= 1.5)
        #expect(abs(underUser + 20) <= 1.5)
        #expect(abs(released + 6) <= 1, "the duck restored a snapshot instead of the user's volume")
        #expect(final.map { abs($0.volumeDb + 6) < 0.05 && $0.gainDb == 0 } == true)
    }

    @Test("A7: a user volume change in the middle of a ramp ends at user volume × gain")
    func userVolumeDuringRamp() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let capture = try Capture(pulse)
        let stream = try tone(pulse, 660)
        defer { stream.close() }
        let index = stream.sinkInputIndex
        let ramp = Task { try await pulse.rampGain(sinkInput: index, toDb: -14, duration: 0.6) }
        await sleep(0.25)
        try await pulse.setUserVolume(sinkInput: index, db: -6)
        try await ramp.value
        await sleep(0.05)
        let input = try #require(try pulse.sinkInputs().first { $0.index == index })
        let level = await capture.level(660, at: now() + 0.2)
        print("[measured] user −6 dB mid-ramp to −14: volume \(input.volumeDb) dB (user \(input.userVolumeDb), gain \(input.gainDb)); recorded \(level) dB")
        #expect(abs(input.volumeDb + 20) < 0.05)
        #expect(abs(input.userVolumeDb + 6) < 0.05)
        #expect(abs(level + 20) <= 1.5)
    }

    @Test("a newer ramp supersedes a running one, which returns early")
    func supersede() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let capture = try Capture(pulse)
        let stream = try tone(pulse, 770)
        defer { stream.close() }
        let index = stream.sinkInputIndex
        let t0 = now()
        let slow = Task { try await pulse.rampGain(sinkInput: index, toDb: -30, duration: 1.5); return now() }
        await sleep(0.3)
        try await pulse.rampGain(sinkInput: index, toDb: -10, duration: 0.1)
        let slowEnded = try await slow.value
        let level = await capture.level(770, at: now() + 0.5)
        let input = try #require(try pulse.sinkInputs().first { $0.index == index })
        print("[measured] superseded ramp returned after \(String(format: "%.3f", slowEnded - t0)) s; final gain \(input.gainDb) dB, recorded \(level) dB")
        #expect(slowEnded - t0 < 0.6)
        #expect(abs(input.gainDb + 10) < 0.01)
        #expect(abs(level + 10) <= 1)
    }

    @Test("setMute silences a stream (< −50 dB) and unmuting brings it back")
    func mute() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let log = EventLog(pulse)
        let capture = try Capture(pulse)
        let stream = try tone(pulse, 880)
        defer { stream.close() }
        let index = stream.sinkInputIndex
        await sleep(0.3)
        let mark = log.all.count
        try await pulse.setMute(sinkInput: index, true)
        let event = await log.wait(from: mark) { Self.isChange($0, of: index) { $0.muted } }
        // Measured 0.3 s after each change (the ±50 ms window then lies well after it): on PipeWire
        // the change lands at a quantum boundary and the monitor's time stamps lag under load; at
        // 0.15 s a loaded PipeWire pass once measured −6 dB (half the window still muted).
        let muted = await capture.level(880, at: now() + 0.3)
        try await pulse.setMute(sinkInput: index, false)
        let back = await capture.level(880, at: now() + 0.3)
        print("[measured] muted \(muted) dB, unmuted \(back) dB")
        #expect(event != nil)
        #expect(muted < -50)
        #expect(abs(back) <= 1)
    }

    @Test("corking silences a stream and reports corked; uncorking plays again")
    func cork() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let log = EventLog(pulse)
        let capture = try Capture(pulse)
        let stream = try tone(pulse, 990)
        defer { stream.close() }
        let index = stream.sinkInputIndex
        await sleep(0.3)
        let mark = log.all.count
        try stream.setCorked(true)
        let event = await log.wait(from: mark) { Self.isChange($0, of: index) { $0.corked } }
        let corked = await capture.level(990, at: now() + 0.15)
        try stream.setCorked(false)
        let playing = await capture.level(990, at: now() + 0.3)
        print("[measured] corked \(corked) dB, uncorked \(playing) dB")
        #expect(event != nil)
        #expect(corked < -50)
        #expect(abs(playing) <= 1)
    }

    @Test("sink inputs carry our pid, the session tag and the role; events report add and removal")
    func properties() async throws {
        let pulse = try TestServer.connect("interlude-props-test")
        defer { pulse.disconnect() }
        let log = EventLog(pulse)
        let stream = try tone(pulse, 1100, properties: ["media.role": "music", "interlude.session": "s-42"])
        let index = stream.sinkInputIndex
        let added = await log.wait { if case let .sinkInputAdded(input) = $0 { return input.index == index }; return false }
        let listed = try #require(try pulse.sinkInputs().first { $0.index == index })
        print("[measured] sink input \(index): pid \(listed.processID.map(String.init) ?? "nil"), session \(listed.sessionTag ?? "nil"), role \(listed.role ?? "nil"), app \(listed.applicationName ?? "nil")")
        #expect(listed.processID == getpid())
        #expect(listed.sessionTag == "s-42")
        #expect(listed.role == "music")
        #expect(listed.applicationName == "interlude-props-test")
        #expect(listed.clientIndex != nil)
        #expect(!listed.corked && !listed.muted && abs(listed.volumeDb) < 0.01)
        if case let .sinkInputAdded(input)? = added {
            #expect(input.processID == getpid() && input.sessionTag == "s-42" && input.role == "music")
        } else {
            Issue.record("no sinkInputAdded event for \(index)")
        }
        stream.close()
        let removed = await log.wait { $0 == .sinkInputRemoved(index) }
        #expect(removed != nil)
        #expect(try pulse.sinkInputs().allSatisfy { $0.index != index })
    }

    @Test("S3: an uploaded sample plays audibly with media.role=event; volume 0.2 is −14 dB; limits and removal")
    func sampleCache() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let log = EventLog(pulse)
        let capture = try Capture(pulse)
        let frames = 24000  // 0.5 s at 48 kHz, stereo, 1210 Hz at amplitude 0.25
        let pcm = (0..<frames).flatMap { n -> [Int16] in
            let v = Int16((0.25 * 32767 * sin(2 * Double.pi * 1210 * Double(n) / 48000)).rounded())
            return [v, v]
        }
        try pulse.uploadSample(name: "interlude-test-1210", pcm: pcm, sampleRate: 48000, channels: 2)
        await sleep(0.2)

        let t0 = now()
        let index = try pulse.playSample(name: "interlude-test-1210", volume: 1,
                                         properties: ["media.role": "event", "event.id": "interlude-test"])
        let added = await log.wait { if case let .sinkInputAdded(input) = $0 { return input.index == index }; return false }
        let full = await capture.level(1210, at: t0 + 0.25)
        let after = await capture.level(1210, at: t0 + 0.8)

        let t1 = now()
        _ = try pulse.playSample(name: "interlude-test-1210", volume: 0.2, properties: ["media.role": "event"])
        let quiet = await capture.level(1210, at: t1 + 0.25)
        // Never louder than its volume, from the first millisecond on: the peak of the whole quiet
        // sound (0.25 × 0.2 = 0.05 full scale), so a volume applied late (a loud start) shows.
        await capture.waitUntilRecorded(t1 + 0.7)
        let recorded = capture.recorder.samples()
        let from = min(recorded.count, max(0, Int((t1 - capture.recorder.startTime) * 48000)))
        let to = min(recorded.count, max(from, Int((t1 + 0.7 - capture.recorder.startTime) * 48000)))
        let quietPeak = recorded[from..<to].map { abs($0) }.max() ?? 0
        print("[measured] sample at volume 1: \(full) dB, after its end \(after) dB; at volume 0.2: \(quiet) dB, peak \(quietPeak) (0.05 expected)")
        #expect(abs(full) <= 1)
        #expect(after < -50)
        #expect(abs(quiet + 13.98) <= 1)
        #expect(quietPeak > 0.03 && quietPeak <= 0.05 * 1.122, "peak \(quietPeak) of a sample played at volume 0.2")
        if case let .sinkInputAdded(input)? = added {
            #expect(input.role == "event")
            #expect(input.properties["event.id"] == "interlude-test")
            #expect(input.processID == getpid())
        } else {
            Issue.record("no sinkInputAdded for the played sample \(index)")
        }

        // 16 MiB is the cache's limit on PulseAudio (pipewire-pulse takes one byte less, see
        // `sampleCacheLimit`): the most whole stereo frames within it are taken, one frame more is refused.
        let limit = pulse.sampleCacheLimit
        #expect(limit == PulseConnection.maxSampleBytes - (pulse.serverKind == .pipeWire ? 1 : 0))
        let frameLimit = limit / 4
        try pulse.uploadSample(name: "interlude-test-16mib", pcm: [Int16](repeating: 0, count: frameLimit * 2), sampleRate: 48000, channels: 2)
        try pulse.removeSample(name: "interlude-test-16mib")
        #expect(throws: PulseError.self) {
            do { try pulse.uploadSample(name: "too-large", pcm: [Int16](repeating: 0, count: frameLimit * 2 + 2), sampleRate: 48000, channels: 2) }
            catch let error as PulseError { #expect(error.code == "sampleTooLarge"); throw error }
        }

        try pulse.removeSample(name: "interlude-test-1210")
        let noSample = #expect(throws: PulseError.self) { try pulse.playSample(name: "interlude-test-1210", volume: 1, properties: [:]) }
        #expect(noSample?.code == "noSuchEntity")
        let noRemove = #expect(throws: PulseError.self) { try pulse.removeSample(name: "interlude-test-1210") }
        #expect(noRemove?.code == "noSuchEntity")
    }

    @Test("the recorder's start time places a played sample's onset within a few ms after the request")
    func recorderTiming() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let capture = try Capture(pulse)
        let pcm = (0..<4800).map { n in Int16((0.25 * 32767 * sin(2 * Double.pi * 1000 * Double(n) / 48000)).rounded()) }
        try pulse.uploadSample(name: "interlude-test-click", pcm: pcm, sampleRate: 48000, channels: 1)
        defer { try? pulse.removeSample(name: "interlude-test-click") }
        await sleep(0.5)
        var delays: [Double] = []
        for _ in 0..<5 {
            let t0 = now()
            _ = try pulse.playSample(name: "interlude-test-click", volume: 1, properties: ["media.role": "event"])
            await capture.waitUntilRecorded(t0 + 0.2)
            let samples = capture.recorder.samples()
            let from = max(0, Int((t0 - 0.1 - capture.recorder.startTime) * 48000))
            if let onset = samples[from...].firstIndex(where: { abs($0) > 0.02 }) {
                delays.append(capture.recorder.startTime + Double(onset) / 48000 - t0)
            }
            await sleep(0.3)
        }
        delays.sort()
        print("[measured] request → first sound in the recording: \(delays.map { String(format: "%.1f ms", $0 * 1000) })")
        #expect(delays.count == 5)
        let median = delays.isEmpty ? -1 : delays[delays.count / 2]
        #expect(median >= 0 && median < 0.03, "a sound placed before its request, or late: \(median) s")
    }

    @Test("the default sink can be muted and unmuted (N3); a muted sink is silent at its monitor")
    func sinkMute() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let sink = try pulse.defaultSinkName()
        #expect(sink == TestServer.sink)
        let capture = try Capture(pulse)
        let stream = try tone(pulse, 1320)
        defer { stream.close() }
        #expect(try pulse.sinkMuted(sink) == false)
        try pulse.setSinkMute(sink, true)
        defer { try? pulse.setSinkMute(sink, false) }
        #expect(try pulse.sinkMuted(sink) == true)
        let muted = await capture.level(1320, at: now() + 0.2)
        try pulse.setSinkMute(sink, false)
        #expect(try pulse.sinkMuted(sink) == false)
        let back = await capture.level(1320, at: now() + 0.2)
        print("[measured] sink muted: \(muted) dB; unmuted: \(back) dB")
        #expect(muted < -50)
        #expect(abs(back) <= 1)
        let missing = #expect(throws: PulseError.self) { try pulse.sinkMuted("no-such-sink") }
        #expect(missing?.code == "noSuchEntity")
    }

    @Test("errors are thrown with stable codes, never a crash")
    func errors() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let absent: UInt32 = 999_999
        await #expect(throws: PulseError(code: "noSuchEntity", message: "")) {
            do { try await pulse.rampGain(sinkInput: absent, toDb: -14, duration: 0.1) } catch let e as PulseError { throw PulseError(code: e.code, message: "") }
        }
        await #expect(throws: PulseError(code: "noSuchEntity", message: "")) {
            do { try await pulse.setMute(sinkInput: absent, true) } catch let e as PulseError { throw PulseError(code: e.code, message: "") }
        }
        await #expect(throws: PulseError(code: "noSuchEntity", message: "")) {
            do { try await pulse.setUserVolume(sinkInput: absent, db: -6) } catch let e as PulseError { throw PulseError(code: e.code, message: "") }
        }
        #expect(throws: PulseError(code: "invalidArgument", message: "")) {
            do { _ = try pulse.playSample(name: "x", volume: 2, properties: [:]) } catch let e as PulseError { throw PulseError(code: e.code, message: "") }
        }
        #expect(throws: PulseError(code: "noSuchEntity", message: "")) {
            do { _ = try PulseRecorder(connection: pulse, source: "no-such-source") } catch let e as PulseError { throw PulseError(code: e.code, message: "") }
        }
        let nowhere = PulseConnection(server: "unix:/nonexistent/interlude.sock", clientName: "interlude-tests")
        #expect(throws: PulseError(code: "connectionFailed", message: "")) {
            do { try nowhere.connect(timeout: 2) } catch let e as PulseError { throw PulseError(code: e.code, message: "") }
        }
        #expect(throws: PulseError(code: "notConnected", message: "")) {
            do { _ = try nowhere.sinkInputs() } catch let e as PulseError { throw PulseError(code: e.code, message: "") }
        }
        nowhere.disconnect()
    }
}
