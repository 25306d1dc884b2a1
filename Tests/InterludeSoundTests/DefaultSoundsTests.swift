import InterludeSound
import Testing

/// The committed Sounds/*.wav (made by interlude-soundgen) decode and have the promised shape.
@Suite("S1 default sounds")
struct DefaultSoundsTests {
    static let expected: [(name: String, frames: Int)] = [
        ("default", 57_600),   // 1.2 s: a chime under 1.5 s
        ("critical", 96_000),  // 2.0 s
        ("ringtone", 144_000), // 3.0 s, loopable
        ("prompt", 24_000),    // 0.5 s: under 0.6 s
    ]

    @Test func S1_committedDefaultSoundsDecodeAt48kHz() throws {
        let folder = repositoryRoot() + "/Sounds"
        for (name, frames) in Self.expected {
            let sound = try SoundDecoder.decode(path: "\(folder)/\(name).wav")
            #expect(sound.sampleRate == 48_000, "\(name)")
            #expect(sound.channels == 1, "\(name)")
            #expect(sound.frames == frames, "\(name)")
            // Peak at −3 dBFS (32767 × 10^(−3/20) ≈ 23198), no clipping.
            #expect(abs(peak(sound.pcm) - 23_198) <= 2, "\(name) peak \(peak(sound.pcm))")
            // Soft start and end: first and last samples are 0, no step at either end.
            #expect(sound.pcm.first == 0 && sound.pcm.last == 0, "\(name)")
        }
        let lengths = Dictionary(uniqueKeysWithValues: try Self.expected.map {
            ($0.name, try SoundDecoder.decode(path: "\(folder)/\($0.name).wav").duration)
        })
        #expect(lengths["default"]! < 1.5)
        #expect(abs(lengths["critical"]! - 2) < 0.25)
        #expect(abs(lengths["ringtone"]! - 3) < 0.25)
        #expect(lengths["prompt"]! < 0.6)
    }

    @Test func S1_ringtoneLoopsWithoutAStep() throws {
        let sound = try SoundDecoder.decode(path: repositoryRoot() + "/Sounds/ringtone.wav")
        // The loop seam (last sample → first sample) is no bigger a step than silence.
        #expect(abs(Int(sound.pcm.last!) - Int(sound.pcm.first!)) == 0)
        #expect(sound.pcm.suffix(480).allSatisfy { $0 == 0 })  // ends in silence (10 ms at least)
    }

    @Test func S2_projectFolderFindsTheDefaultSounds() throws {
        let folder = repositoryRoot() + "/Sounds"
        let lookup = SoundLookup(userFolder: nil, projectFolder: folder, dataDirs: [])
        for (name, _) in Self.expected {
            #expect(lookup.resolve(name) == .file(real("\(folder)/\(name).wav")))
        }
    }
}
