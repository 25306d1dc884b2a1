import Foundation
import InterludePulse
import InterludeScenario

/// The sink's monitor, recorded with ``PulseRecorder`` and read on `CLOCK_MONOTONIC`
/// (``PulseClock/monotonicSeconds()``): `startTime + i / rate` is when sample `i` was heard.
public final class Monitor: @unchecked Sendable {
    public let recorder: PulseRecorder
    /// Sample rate of the recording (Hz).
    public let rate = 48000

    /// Starts recording `source` (e.g. `SINK.monitor`) on `pulse`.
    /// - Throws: ``PulseError`` when the source cannot be recorded.
    public init(pulse: PulseConnection, source: String) throws {
        recorder = try PulseRecorder(connection: pulse, source: source, sampleRate: rate)
    }

    /// Stops the recording.
    public func stop() { recorder.stop() }

    /// Monotonic time up to which the recording is complete.
    public var recordedUntil: Double { recorder.startTime + Double(recorder.samples().count) / Double(rate) }

    /// Waits until the recording covers monotonic time `t` (or 5 s pass beyond it).
    public func waitCovered(_ t: Double) async {
        let giveUp = now() + max(0, t - now()) + 5
        while recordedUntil < t && now() < giveUp { try? await Task.sleep(nanoseconds: 5_000_000) }
    }

    /// Sample index of monotonic time `t` in `samples` (clamped).
    public func index(_ t: Double, in samples: [Float]) -> Int {
        min(samples.count, max(0, Int(((t - recorder.startTime) * Double(rate)).rounded())))
    }

    /// The first sample louder than `threshold` between monotonic `from` and `to`, as monotonic time.
    public func firstSound(from: Double, to: Double, threshold: Float) async -> Double? {
        await waitCovered(to)
        let s = recorder.samples()
        let a = index(from, in: s), b = index(to, in: s)
        guard a < b, let i = s[a..<b].firstIndex(where: { abs($0) > threshold }) else { return nil }
        return recorder.startTime + Double(i) / Double(rate)
    }

    /// Peak absolute sample between monotonic `from` and `to`.
    public func peak(from: Double, to: Double) async -> Float {
        await waitCovered(to)
        let s = recorder.samples()
        let a = index(from, in: s), b = index(to, in: s)
        guard a < b else { return 0 }
        return s[a..<b].reduce(0) { max($0, abs($1)) }
    }

    /// Levels (dB, 0 dB = a sine of amplitude 0.25) of a tone at `frequency` in windows of `window`
    /// seconds every `hop` seconds, between monotonic `from` and `to`; each with its centre's time.
    public func levels(_ frequency: Double, from: Double, to: Double, window: Double, hop: Double) async -> [(t: Double, db: Double)] {
        await waitCovered(to)
        let s = recorder.samples()
        let a = index(from, in: s), b = index(to, in: s)
        guard b - a > Int(window * Double(rate)) else { return [] }
        let slice = Array(s[a..<b])
        let start = recorder.startTime + Double(a) / Double(rate)
        let hopSamples = max(1, Int((hop * Double(rate)).rounded()))
        let levels = ToneAnalysis.levels(samples: slice, sampleRate: rate, frequency: frequency, window: window, hop: hop)
        return levels.enumerated().map { i, db in
            (start + Double(i * hopSamples) / Double(rate) + window / 2, db)
        }
    }
}

/// Monotonic seconds (`CLOCK_MONOTONIC`, the recorder's clock).
public func now() -> Double { PulseClock.monotonicSeconds() }

/// Sleeps `seconds` (nothing for ≤ 0).
public func sleep(_ seconds: Double) async {
    if seconds > 0 { try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9)) }
}

/// Order statistics of a sample of durations (seconds).
public struct Stats: Sendable {
    /// The values, ascending.
    public let sorted: [Double]
    public init(_ values: [Double]) { sorted = values.sorted() }
    /// How many values.
    public var count: Int { sorted.count }
    /// The median (mean of the middle two for an even count).
    public var median: Double? {
        guard !sorted.isEmpty else { return nil }
        let m = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2
    }
    /// The `p`-quantile (0…1), nearest rank.
    public func quantile(_ p: Double) -> Double? {
        guard !sorted.isEmpty else { return nil }
        return sorted[min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))]
    }
}

/// A 95 % bootstrap interval of median(a) / median(b): both samples resampled with replacement
/// 2000 times. Shows how far the ratio of two medians of noisy onsets can be trusted.
public func bootstrapRatio(_ a: [Double], _ b: [Double], resamples: Int = 2000) -> (low: Double, high: Double)? {
    guard !a.isEmpty, !b.isEmpty else { return nil }
    var ratios: [Double] = []
    ratios.reserveCapacity(resamples)
    for _ in 0..<resamples {
        let ra = Stats((0..<a.count).map { _ in a[Int.random(in: 0..<a.count)] }).median!
        let rb = Stats((0..<b.count).map { _ in b[Int.random(in: 0..<b.count)] }).median!
        if rb > 0 { ratios.append(ra / rb) }
    }
    let s = Stats(ratios)
    guard let low = s.quantile(0.025), let high = s.quantile(0.975) else { return nil }
    return (low, high)
}
