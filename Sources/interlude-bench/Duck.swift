import Foundation
import InterludeMeasure
import InterludeClient
import InterludePolicy
import InterludePulse
import InterludeScenario
import Synchronization

/// Duck reaction: a playback session plays a 440 Hz tone through its own stream; a `duckOthers`
/// prompt session is activated through the client library; the tone's level is read from the monitor.
struct DuckBench {
    let monitor: Monitor
    let pulse: PulseConnection
    let socket: String
    let levelDb: Double
    let rampDown: Double
    let rampUp: Double
    let log: (String) -> Void
    let frequency = 440.0
    /// Analysis window and hop (s): one tone only, so a short window is clean (4-term
    /// Blackman–Harris, 8.8 periods of 440 Hz); times are window centres, ±10 ms.
    let window = 0.02
    let hop = 0.002

    struct Run {
        /// Request → the server reports the tone stream's volume lowered: the first ramp step
        /// applied (A2), without the sink's buffer between it and the monitor.
        var firstStep: Double?
        /// Request → the tone has fallen by 0.5 dB (the ramp audibly started).
        var fall: Double?
        /// Request → the tone is within 1 dB of the duck level.
        var target: Double?
        /// Request → the activation reply arrived (A11: after the ramp).
        var reply: Double
        /// Level reached, dB relative to before (median 0.5–0.8 s after the request).
        var reached: Double?
    }

    func run(runs: Int) async throws -> [Run] {
        let music = ReferenceApp(socket: socket, app: "org.interlude.bench.Music", category: .playback,
                                 source: .sine(frequency: frequency, amplitude: 0.25), pulse: pulse)
        try await music.register()
        try await music.activate()
        do {
            let out = try await measure(runs: runs)
            await music.stop()
            return out
        } catch {
            await music.stop()
            throw error
        }
    }

    /// The volumes the server reports for its sink inputs (added and changed events on the bench's
    /// own connection), with the time each report arrived (`now()`, seconds).
    final class VolumeReports: Sendable {
        private let reports = Mutex<[(t: Double, index: UInt32, db: Double)]>([])

        func record(_ index: UInt32, _ db: Double) {
            let t = now()
            reports.withLock { $0.append((t, index, db)) }
        }

        /// The first report at or after `time` of a sink input's volume at least 0.1 dB below its
        /// last report before `time`, seconds after `time`; nil if none.
        func firstLowered(after time: Double) -> Double? {
            reports.withLock { all in
                var before: [UInt32: Double] = [:]
                for r in all where r.t < time { before[r.index] = r.db }
                return all.first { r in r.t >= time && before[r.index].map { r.db < $0 - 0.1 } == true }.map { $0.t - time }
            }
        }
    }

    private func measure(runs: Int) async throws -> [Run] {
        let volumes = VolumeReports()
        let events = pulse.events
        let watch = Task {
            for await e in events {
                switch e {
                case let .sinkInputAdded(s), let .sinkInputChanged(s): volumes.record(s.index, s.volumeDb)
                default: break
                }
            }
        }
        defer { watch.cancel() }
        let prompt = try await InterludeClient.connect(socket: socket, app: "org.interlude.bench.Prompt")
        defer { prompt.close() }
        let session = try await prompt.register(category: .playback, mode: .voicePrompt,
                                                options: [.duckOthers, .interruptSpokenAudioAndMixWithOthers])
        await sleep(1.0)
        var out: [Run] = []
        for r in 0..<runs {
            log("duck: run \(r + 1)/\(runs)")
            let t0 = now()
            let before = await monitor.levels(frequency, from: t0 - 0.3, to: t0 - 0.01, window: window, hop: hop)
            guard let base = Stats(before.map(\.db)).median, base > -20 else {
                log("warning: the tone is not playing before run \(r + 1); skipped")
                await sleep(1); continue
            }
            let request = now()
            _ = try await prompt.activate(session)
            let reply = now() - request
            let after = await monitor.levels(frequency, from: request - window, to: request + 0.85, window: window, hop: hop)
                .filter { $0.t >= request }
            let fall = after.first { $0.db - base <= -0.5 }.map { $0.t - request }
            let target = after.first { $0.db - base <= levelDb + 1 }.map { $0.t - request }
            let reached = Stats(after.filter { $0.t >= request + 0.5 }.map { $0.db - base }).median
            out.append(Run(firstStep: volumes.firstLowered(after: request), fall: fall, target: target, reply: reply, reached: reached))
            try await prompt.deactivate(session)
            await sleep(rampUp + 0.6)
        }
        return out
    }
}
