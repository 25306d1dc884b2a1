import Glibc

/// A mono buffer of samples in the range about −1…1 at a fixed rate, and the few building blocks
/// the default sounds are made of. Pure arithmetic: no randomness, no clock, no I/O, so the same
/// build always produces the same samples.
struct Buffer {
    static let rate = 48_000
    var samples: [Double]

    /// A silent buffer `seconds` long (rounded to whole frames).
    init(seconds: Double) {
        samples = [Double](repeating: 0, count: Self.frames(seconds))
    }

    static func frames(_ seconds: Double) -> Int { Int((seconds * Double(rate)).rounded()) }

    /// Adds one sine partial: starts at `start` (s), frequency `frequency` (Hz), peak amplitude
    /// `amplitude`, a raised-cosine attack of `attack` s (no click), exponential decay with time
    /// constant `decay` s (nil: sustained), and a raised-cosine release over the last `release` s
    /// of `length` so it ends at exactly 0.
    mutating func addPartial(
        start: Double, length: Double, frequency: Double, amplitude: Double,
        attack: Double, decay: Double?, release: Double
    ) {
        let first = Self.frames(start)
        let count = Self.frames(length)
        let attackFrames = max(1, Self.frames(attack))
        let releaseFrames = max(1, Self.frames(release))
        let rate = Double(Self.rate)
        for n in 0..<count {
            let index = first + n
            guard index >= 0 && index < samples.count else { continue }
            let t = Double(n) / rate
            var envelope = amplitude
            if n < attackFrames {
                envelope *= 0.5 - 0.5 * cos(Double.pi * Double(n) / Double(attackFrames))
            }
            if let decay {
                envelope *= exp(-max(0, t - attack) / decay)
            }
            let left = count - 1 - n
            if left < releaseFrames {
                envelope *= 0.5 - 0.5 * cos(Double.pi * Double(left) / Double(releaseFrames))
            }
            samples[index] += envelope * sin(2 * Double.pi * frequency * t)
        }
    }

    /// Adds a struck note made of harmonic partials `(multiple, relative amplitude, decay s)`.
    mutating func addNote(
        start: Double, length: Double, frequency: Double, amplitude: Double,
        partials: [(multiple: Double, level: Double, decay: Double?)],
        attack: Double, release: Double
    ) {
        for p in partials {
            addPartial(start: start, length: length, frequency: frequency * p.multiple,
                       amplitude: amplitude * p.level, attack: attack, decay: p.decay, release: release)
        }
    }

    /// Largest absolute sample value.
    var peak: Double { samples.reduce(0) { max($0, abs($1)) } }

    /// 16-bit samples scaled so the peak sits at `peakDBFS` (e.g. −3 dBFS), rounded to nearest.
    func pcm16(peakDBFS: Double) -> [Int16] {
        let target = 32767 * pow(10, peakDBFS / 20)
        let scale = peak > 0 ? target / peak : 0
        return samples.map { Int16(($0 * scale).rounded()) }
    }
}

/// The default sounds: name, one-line description, and how to make them.
struct SoundSpec: Sendable {
    let name: String
    let description: String
    let make: @Sendable () -> Buffer
}

/// Note frequencies (equal temperament, A4 = 440 Hz).
enum Note {
    static let e5 = 659.255, g5 = 783.991, c6 = 1046.502, e6 = 1318.510, g6 = 1567.982
    static let e7 = 2637.020, g7 = 3135.963
}

let chimePartials: [(multiple: Double, level: Double, decay: Double?)] = [
    (1, 1.0, 0.38), (2, 0.22, 0.16), (3, 0.06, 0.09),
]
let marimbaPartials: [(multiple: Double, level: Double, decay: Double?)] = [
    (1, 1.0, 0.22), (4, 0.12, 0.05), (2, 0.10, 0.10),
]

let sounds: [SoundSpec] = [
    SoundSpec(
        name: "default",
        description: "Notification chime: C6 then G6 a fifth above, struck, decaying (1.2 s).",
        make: {
            var b = Buffer(seconds: 1.2)
            b.addNote(start: 0.00, length: 1.2, frequency: Note.c6, amplitude: 0.9,
                      partials: chimePartials, attack: 0.006, release: 0.15)
            b.addNote(start: 0.14, length: 1.06, frequency: Note.g6, amplitude: 0.8,
                      partials: chimePartials, attack: 0.006, release: 0.15)
            return b
        }),
    SoundSpec(
        name: "critical",
        description: "Critical alert: four pairs of high beeps (E7, G7, with a 3rd harmonic), 4 per second (2.0 s).",
        make: {
            var b = Buffer(seconds: 2.0)
            let beep: [(multiple: Double, level: Double, decay: Double?)] = [(1, 1.0, nil), (3, 0.25, nil)]
            for cycle in 0..<4 {
                let t = Double(cycle) * 0.5
                b.addNote(start: t, length: 0.11, frequency: Note.e7, amplitude: 1,
                          partials: beep, attack: 0.004, release: 0.006)
                b.addNote(start: t + 0.15, length: 0.11, frequency: Note.g7, amplitude: 1,
                          partials: beep, attack: 0.004, release: 0.006)
            }
            return b
        }),
    SoundSpec(
        name: "ringtone",
        description: "Ringtone: two marimba-like arpeggios (E5 G5 C6 G5) then silence; loops every 3.0 s and starts and ends at 0.",
        make: {
            var b = Buffer(seconds: 3.0)
            let notes = [Note.e5, Note.g5, Note.c6, Note.g5]
            for phrase in [0.0, 0.9] {
                for (i, f) in notes.enumerated() {
                    b.addNote(start: phrase + 0.15 * Double(i), length: 0.6, frequency: f, amplitude: 0.8,
                              partials: marimbaPartials, attack: 0.004, release: 0.1)
                }
            }
            return b
        }),
    SoundSpec(
        name: "prompt",
        description: "Prompt cue: two rising tones, G5 then C6 (0.5 s).",
        make: {
            var b = Buffer(seconds: 0.5)
            let tone: [(multiple: Double, level: Double, decay: Double?)] = [(1, 1.0, 0.5), (2, 0.15, 0.2)]
            b.addNote(start: 0.0, length: 0.16, frequency: Note.g5, amplitude: 0.8,
                      partials: tone, attack: 0.008, release: 0.03)
            b.addNote(start: 0.17, length: 0.31, frequency: Note.c6, amplitude: 0.8,
                      partials: tone, attack: 0.008, release: 0.08)
            return b
        }),
]
