import Foundation

/// Measures a tone's level over time in a mono recording with a Goertzel filter per window.
///
/// Every scenario source plays a steady sine at its own frequency, at least 100 Hz from every other
/// (SCENARIOS.md), so a recording of the output splits back into each source's level by frequency.
///
/// Each window is tapered with a 4-term Blackman–Harris window and the Goertzel recursion is run at
/// the exact frequency asked for (no rounding to a DFT bin), so a steady sine measures exactly. The
/// taper is what keeps neighbours apart; it needs a longer aperture than a rectangular window:
/// measured leakage of an equal-level tone at 100 Hz or more away is about −14 dB with a 20 ms
/// aperture, −36 dB with 30 ms and −92 dB with 40 ms. So the default window is 40 ms (whose
/// noise-equivalent length, 20 ms, is the SCENARIOS.md time resolution), hopping by 20 ms.
public enum ToneAnalysis {
    /// The level reported for silence, and the floor of every level: a finite number, never −inf.
    public static let silenceDb: Double = -120

    /// The default analysis window in seconds (see the type's documentation for why 40 ms).
    public static let defaultWindow: Double = 0.04

    /// Level of the sine at `frequency` Hz, in dB relative to a sine of peak amplitude
    /// `referenceAmplitude` (fraction of full scale; default 0.25, the scenario tones), per window.
    ///
    /// - Parameters:
    ///   - samples: mono samples, full scale ±1.
    ///   - sampleRate: samples per second.
    ///   - frequency: the tone's frequency in Hz.
    ///   - window: analysis window length in seconds (default 0.04).
    ///   - hop: seconds between window starts (default: half the window, 0.02 s by default).
    ///   - referenceAmplitude: the amplitude that reads 0 dB.
    /// - Returns: one level per window; window `i` covers
    ///   `[i·hop, i·hop + window)` seconds, its centre is at `i·hop + window/2`. Levels are floored at
    ///   ``silenceDb`` (−120 dB). Empty if the recording is shorter than one window or an argument is
    ///   not positive.
    public static func levels(
        samples: [Float], sampleRate: Int, frequency: Double, window: Double = defaultWindow,
        hop: Double? = nil, referenceAmplitude: Double = 0.25
    ) -> [Double] {
        guard let plan = Plan(sampleRate: sampleRate, frequency: frequency, window: window, hop: hop,
                              referenceAmplitude: referenceAmplitude),
              samples.count >= plan.length
        else { return [] }
        var result: [Double] = []
        result.reserveCapacity((samples.count - plan.length) / plan.hop + 1)
        samples.withUnsafeBufferPointer { buffer in
            var start = 0
            while start + plan.length <= buffer.count {
                result.append(plan.level(buffer, from: start))
                start += plan.hop
            }
        }
        return result
    }

    /// The level at time `t` (seconds from the first sample): the median of the levels of the windows
    /// whose centres lie in `[t − span/2, t + span/2]` (default span 0.1 s), in dB relative to
    /// `referenceAmplitude` as in ``levels(samples:sampleRate:frequency:window:hop:referenceAmplitude:)``.
    /// Uses the default window and hop. Returns ``silenceDb`` when no window centre lies in the span
    /// (for example `t` beyond the end of the recording): check the recording's length before
    /// reading a "silent" verdict from it.
    public static func level(
        samples: [Float], sampleRate: Int, frequency: Double, at t: Double, span: Double = 0.1,
        referenceAmplitude: Double = 0.25
    ) -> Double {
        guard let plan = Plan(sampleRate: sampleRate, frequency: frequency, window: defaultWindow,
                              hop: nil, referenceAmplitude: referenceAmplitude),
              sampleRate > 0, span >= 0
        else { return silenceDb }
        let rate = Double(sampleRate)
        let halfWindow = Double(plan.length) / rate / 2
        let hopSeconds = Double(plan.hop) / rate
        // Window i is centred at i·hop + halfWindow; keep those within the span.
        let first = max(0, Int(((t - span / 2 - halfWindow) / hopSeconds).rounded(.up)))
        let last = Int(((t + span / 2 - halfWindow) / hopSeconds).rounded(.down))
        guard last >= first else { return silenceDb }
        var found: [Double] = []
        samples.withUnsafeBufferPointer { buffer in
            for i in first...last {
                let start = i * plan.hop
                guard start + plan.length <= buffer.count else { break }
                found.append(plan.level(buffer, from: start))
            }
        }
        return median(found) ?? silenceDb
    }

    /// The median of `values`, nil if empty.
    static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let mid = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
    }

    /// What one analysis needs, computed once: window length and taper, hop, Goertzel coefficient.
    private struct Plan {
        let length: Int
        let hop: Int
        let taper: [Double]
        let coefficient: Double
        /// 2 / (Σ taper · reference): turns |X(f)| into amplitude relative to the reference.
        let scale: Double

        init?(sampleRate: Int, frequency: Double, window: Double, hop: Double?, referenceAmplitude: Double) {
            guard sampleRate > 0, frequency > 0, window > 0, referenceAmplitude > 0,
                  frequency < Double(sampleRate) / 2
            else { return nil }
            let rate = Double(sampleRate)
            length = max(2, Int((window * rate).rounded()))
            let hopSeconds = hop ?? window / 2
            guard hopSeconds > 0 else { return nil }
            self.hop = max(1, Int((hopSeconds * rate).rounded()))
            // 4-term Blackman–Harris (−92 dB side lobes), symmetric.
            let n1 = Double(length - 1)
            taper = (0..<length).map { n in
                let x = 2 * Double.pi * Double(n) / n1
                return 0.35875 - 0.48829 * cos(x) + 0.14128 * cos(2 * x) - 0.01168 * cos(3 * x)
            }
            coefficient = 2 * cos(2 * Double.pi * frequency / rate)
            scale = 2 / (taper.reduce(0, +) * referenceAmplitude)
        }

        /// Goertzel at the exact frequency over `length` tapered samples from `start`:
        /// |Σ x[n]·w[n]·e^(−jωn)| = sqrt(s1² + s2² − c·s1·s2).
        func level(_ x: UnsafeBufferPointer<Float>, from start: Int) -> Double {
            var s1 = 0.0, s2 = 0.0
            for n in 0..<length {
                let s0 = Double(x[start + n]) * taper[n] + coefficient * s1 - s2
                s2 = s1
                s1 = s0
            }
            let power = max(0, s1 * s1 + s2 * s2 - coefficient * s1 * s2)
            let relative = power.squareRoot() * scale
            guard relative > 0, relative.isFinite else { return ToneAnalysis.silenceDb }
            return max(ToneAnalysis.silenceDb, 20 * log10(relative))
        }
    }
}
