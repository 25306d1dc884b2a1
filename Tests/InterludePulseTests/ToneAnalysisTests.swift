import Foundation
import Testing
import InterludeScenario

/// ToneAnalysis on synthesized signals: no server needed.
@Suite struct ToneAnalysisTests {
    static let rate = 48000

    /// `seconds` of the sum of sines (frequency Hz, peak amplitude of full scale), with a phase offset.
    static func tones(_ parts: [(Double, Double)], seconds: Double, phase: Double = 0.3) -> [Float] {
        let count = Int(seconds * Double(rate))
        return (0..<count).map { n in
            let t = Double(n) / Double(rate)
            return Float(parts.reduce(0.0) { $0 + $1.1 * sin(2 * .pi * $1.0 * t + phase) })
        }
    }

    @Test("a sine of the reference amplitude reads 0 dB, and scaled ones read their gain",
          arguments: [440.0, 550, 950, 990, 1320])
    func exactLevels(frequency: Double) {
        for db in [0.0, -6, -14, -40] {
            let amplitude = 0.25 * pow(10, db / 20)
            let x = Self.tones([(frequency, amplitude)], seconds: 1)
            let levels = ToneAnalysis.levels(samples: x, sampleRate: Self.rate, frequency: frequency)
            #expect(levels.count == 49)  // (1 s − 40 ms) / 20 ms + 1
            for level in levels { #expect(abs(level - db) < 0.01, "\(frequency) Hz at \(db) dB read \(level)") }
            let at = ToneAnalysis.level(samples: x, sampleRate: Self.rate, frequency: frequency, at: 0.5)
            #expect(abs(at - db) < 0.01)
        }
    }

    @Test("tones 100 Hz or more apart do not leak into each other by more than −50 dB")
    func twoToneSeparation() {
        let pairs: [(Double, Double)] = [(440, 550), (440, 540), (550, 440), (990, 1090), (1320, 1220), (440, 1320), (990, 890)]
        for (measured, other) in pairs {
            // The other tone alone at full reference level: what leaks into `measured`.
            let alone = Self.tones([(other, 0.25)], seconds: 1)
            let leak = ToneAnalysis.levels(samples: alone, sampleRate: Self.rate, frequency: measured).max() ?? 0
            #expect(leak < -50, "\(other) Hz leaks into \(measured) Hz at \(leak) dB")
            // Both together, the measured one ducked to −14 dB: still reads −14.
            let mix = Self.tones([(measured, 0.25 * pow(10, -14.0 / 20)), (other, 0.25)], seconds: 1)
            for level in ToneAnalysis.levels(samples: mix, sampleRate: Self.rate, frequency: measured) {
                #expect(abs(level + 14) < 0.05, "\(measured) Hz at −14 dB next to \(other) Hz read \(level)")
            }
        }
    }

    @Test("silence and absent tones read a finite floor, never −inf or NaN")
    func silence() {
        let zero = [Float](repeating: 0, count: Self.rate)
        let levels = ToneAnalysis.levels(samples: zero, sampleRate: Self.rate, frequency: 440)
        #expect(!levels.isEmpty)
        #expect(levels.allSatisfy { $0 == ToneAnalysis.silenceDb })
        #expect(ToneAnalysis.level(samples: zero, sampleRate: Self.rate, frequency: 440, at: 0.5) == ToneAnalysis.silenceDb)
        #expect(ToneAnalysis.levels(samples: [], sampleRate: Self.rate, frequency: 440).isEmpty)
        #expect(ToneAnalysis.level(samples: [], sampleRate: Self.rate, frequency: 440, at: 0) == ToneAnalysis.silenceDb)
        // Beyond the end of a recording: the floor (documented), not a crash.
        let x = Self.tones([(440, 0.25)], seconds: 0.5)
        #expect(ToneAnalysis.level(samples: x, sampleRate: Self.rate, frequency: 440, at: 3) == ToneAnalysis.silenceDb)
        // Nonsense arguments give no windows rather than NaN.
        #expect(ToneAnalysis.levels(samples: x, sampleRate: 0, frequency: 440).isEmpty)
        #expect(ToneAnalysis.levels(samples: x, sampleRate: Self.rate, frequency: 30000).isEmpty)
    }

    @Test("a step in level is located in time to within one hop")
    func stepTiming() {
        // 1 s at 0 dB then 1 s at −20 dB.
        let loud = Self.tones([(440, 0.25)], seconds: 1)
        let quiet = Self.tones([(440, 0.025)], seconds: 1)
        let x = loud + quiet
        #expect(abs(ToneAnalysis.level(samples: x, sampleRate: Self.rate, frequency: 440, at: 0.8)) < 0.05)
        #expect(abs(ToneAnalysis.level(samples: x, sampleRate: Self.rate, frequency: 440, at: 1.2) + 20) < 0.05)
        let levels = ToneAnalysis.levels(samples: x, sampleRate: Self.rate, frequency: 440)
        // First window centred after the step that reads below −10 dB: centre within 20 ms of 1.0 s.
        let index = levels.firstIndex { $0 < -10 }!
        let centre = Double(index) * 0.02 + 0.02
        #expect(abs(centre - 1.0) <= 0.02 + 1e-9, "step found at \(centre) s")
    }
}
