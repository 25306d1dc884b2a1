// Fuzz target `sound`: random bytes as a sound file through SoundDecoder.decode (libsndfile, S1,
// S3). The property: nothing traps or reads out of bounds; the result is a SoundError or a sound
// with frames > 0, sampleRate > 0, channels > 0, pcm.count == frames × channels, within the
// limits passed.
import Foundation
import InterludeSound

let file = scratchPath("sound")
/// Small limits keep each execution short (a 30 s sound decodes 1.4 M samples).
let maxDuration = 2.0
let maxBytes = 1 << 20

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSound(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = UnsafeBufferPointer(start: data, count: size)
    writeScratch(input, to: file)
    guard let s = try? SoundDecoder.decode(path: file, maxDuration: maxDuration, maxBytes: maxBytes) else { return 0 }
    fuzzCheck(s.frames > 0 && s.sampleRate > 0 && s.channels > 0, "decoded an empty sound: \(s.frames) frames, \(s.sampleRate) Hz, \(s.channels) channels")
    fuzzCheck(s.pcm.count == s.frames * s.channels, "pcm of \(s.pcm.count) samples is not \(s.frames) × \(s.channels)")
    fuzzCheck(s.duration <= maxDuration && s.byteCount <= maxBytes, "over the limits: \(s.duration) s, \(s.byteCount) bytes")
    return 0
}
