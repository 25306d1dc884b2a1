// interlude-soundgen: writes Interlude's default sounds (our own work, CC0-1.0) as 48 kHz 16-bit
// mono WAV files via libsndfile. Deterministic: the same build writes byte-identical files.
//
// Usage: interlude-soundgen [FOLDER]     (default: Sounds)
import CSndfile
import Glibc

let peakDBFS = -3.0

/// Writes one line to standard error (fd 2).
func printError(_ message: String) {
    let line = "interlude-soundgen: \(message)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

/// Writes `pcm` (mono, 48 kHz) to `path` as WAV PCM-16 through a temporary file and rename(2).
/// Only title and copyright strings are stored (no software/date strings, which would vary).
func writeWAV(_ pcm: [Int16], to path: String, title: String) -> String? {
    let temporary = path + ".tmp"
    var info = SF_INFO()
    info.samplerate = Int32(Buffer.rate)
    info.channels = 1
    info.format = Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16)
    guard let file = sf_open(temporary, Int32(SFM_WRITE), &info) else {
        return String(cString: sf_strerror(nil))
    }
    _ = sf_set_string(file, Int32(SF_STR_TITLE), title)
    _ = sf_set_string(file, Int32(SF_STR_COPYRIGHT), "CC0-1.0, Interlude project")
    let written = pcm.withUnsafeBufferPointer { sf_writef_short(file, $0.baseAddress, sf_count_t($0.count)) }
    let error = written == pcm.count ? nil : String(cString: sf_strerror(file))
    if sf_close(file) != 0 || error != nil {
        unlink(temporary)
        return error ?? "sf_close failed"
    }
    if rename(temporary, path) != 0 {
        let message = String(cString: strerror(errno))
        unlink(temporary)
        return message
    }
    return nil
}

let arguments = CommandLine.arguments.dropFirst()
if arguments.contains("-h") || arguments.contains("--help") || arguments.count > 1 {
    print("usage: interlude-soundgen [FOLDER]   (writes \(sounds.map { $0.name + ".wav" }.joined(separator: ", ")); default FOLDER: Sounds)")
    exit(arguments.count > 1 ? 2 : 0)
}
let folder = arguments.first ?? "Sounds"
if mkdir(folder, 0o755) != 0 && errno != EEXIST {
    printError("cannot create \(folder): \(String(cString: strerror(errno)))")
    exit(1)
}

var failed = false
for sound in sounds {
    let pcm = sound.make().pcm16(peakDBFS: peakDBFS)
    let path = folder.hasSuffix("/") ? folder + sound.name + ".wav" : folder + "/" + sound.name + ".wav"
    if let error = writeWAV(pcm, to: path, title: "Interlude \(sound.name)") {
        printError("\(path): \(error)")
        failed = true
        continue
    }
    let peak = pcm.reduce(0) { max($0, abs(Int($1))) }
    let seconds = Double(pcm.count) / Double(Buffer.rate)
    let dB = 20 * log10(Double(peak) / 32767)
    print("\(path)\t\(pcm.count) frames\t\(seconds) s\tpeak \((dB * 100).rounded() / 100) dBFS\t\(sound.description)")
}
exit(failed ? 1 : 0)
