import CSndfile
import Foundation
import Glibc
import InterludeSound

/// A fresh temporary folder (mkdtemp under /tmp); the caller removes it.
func makeTempDir() throws -> String {
    var template = Array("/tmp/interlude-sound-test-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw TestFailure("mkdtemp failed")
    }
    return String(cString: made)
}

/// Runs `body` with a fresh temporary folder, removed afterwards.
func withTempDir<T>(_ body: (String) throws -> T) throws -> T {
    let path = try makeTempDir()
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Creates a file (and its folders) with the given bytes.
func writeFile(_ path: String, _ bytes: [UInt8] = []) throws {
    let folder = (path as NSString).deletingLastPathComponent
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
        throw TestFailure("cannot create \(path)")
    }
}

func writeText(_ path: String, _ text: String) throws { try writeFile(path, Array(text.utf8)) }

func makeDir(_ path: String) throws {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
}

func symlink(at path: String, to target: String) throws {
    try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
}

/// realpath(3), for expected values.
func real(_ path: String) -> String {
    guard let r = realpath(path, nil) else { return path }
    defer { free(r) }
    return String(cString: r)
}

/// Runs /usr/bin/sox with `arguments`; throws with its stderr on failure.
func sox(_ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sox")
    process.arguments = arguments
    let errors = Pipe()
    process.standardError = errors
    try process.run()
    let message = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw TestFailure("sox \(arguments.joined(separator: " ")): \(String(decoding: message, as: UTF8.self))")
    }
}

/// Writes interleaved 16-bit `pcm` as raw little-endian and converts it with sox to `path`
/// (format from the extension). Lossless targets keep the exact sample values.
func soxFromPCM(_ pcm: [Int16], rate: Int, channels: Int, to path: String, type: String? = nil) throws {
    let raw = path + ".raw"
    var bytes: [UInt8] = []
    bytes.reserveCapacity(pcm.count * 2)
    for s in pcm {
        let u = UInt16(bitPattern: s.littleEndian)
        bytes.append(UInt8(u & 0xff)); bytes.append(UInt8(u >> 8))
    }
    try writeFile(raw, bytes)
    defer { unlink(raw) }
    try sox(["-t", "raw", "-r", "\(rate)", "-e", "signed-integer", "-b", "16", "-c", "\(channels)", "-L", raw]
            + (type.map { ["-t", $0] } ?? []) + [path])
}

/// Writes a file with libsndfile directly (for formats sox cannot write here: Ogg Opus, MP3, and
/// float WAV with out-of-range values). `format` is an SF_FORMAT_* combination.
func sndfileWrite(path: String, format: Int32, rate: Int, channels: Int, shorts: [Int16]) throws {
    var info = SF_INFO()
    info.samplerate = Int32(rate); info.channels = Int32(channels); info.format = format
    guard sf_format_check(&info) == SF_TRUE else { throw TestFailure("libsndfile cannot write format \(format)") }
    guard let file = sf_open(path, Int32(SFM_WRITE), &info) else {
        throw TestFailure("sf_open(\(path)): \(String(cString: sf_strerror(nil)))")
    }
    let n = shorts.withUnsafeBufferPointer { sf_writef_short(file, $0.baseAddress, sf_count_t(shorts.count / channels)) }
    sf_close(file)
    guard n == shorts.count / channels else { throw TestFailure("short write to \(path)") }
}

/// Float variant of ``sndfileWrite(path:format:rate:channels:shorts:)``; values are stored as given.
func sndfileWrite(path: String, format: Int32, rate: Int, channels: Int, floats: [Float]) throws {
    var info = SF_INFO()
    info.samplerate = Int32(rate); info.channels = Int32(channels); info.format = format
    guard let file = sf_open(path, Int32(SFM_WRITE), &info) else {
        throw TestFailure("sf_open(\(path)): \(String(cString: sf_strerror(nil)))")
    }
    _ = sf_command(file, Int32(SFC_SET_NORM_FLOAT), nil, Int32(SF_TRUE))
    let n = floats.withUnsafeBufferPointer { sf_writef_float(file, $0.baseAddress, sf_count_t(floats.count / channels)) }
    sf_close(file)
    guard n == floats.count / channels else { throw TestFailure("short write to \(path)") }
}

/// `seconds` of a sine at `frequency` Hz and `amplitude` (0…1 of full scale), interleaved with the
/// same signal in every channel.
func sine(seconds: Double, rate: Int, channels: Int, frequency: Double, amplitude: Double) -> [Int16] {
    let frames = Int(seconds * Double(rate))
    var pcm: [Int16] = []
    pcm.reserveCapacity(frames * channels)
    for n in 0..<frames {
        let v = Int16((amplitude * 32767 * sin(2 * Double.pi * frequency * Double(n) / Double(rate))).rounded())
        for _ in 0..<channels { pcm.append(v) }
    }
    return pcm
}

/// Frequency estimate from rising zero crossings of channel 0 between `from` and `to` (fractions).
func estimatedFrequency(_ sound: DecodedSound, from: Double = 0.2, to: Double = 0.8) -> Double {
    let first = Int(Double(sound.frames) * from), last = Int(Double(sound.frames) * to)
    var crossings = 0
    for f in (first + 1)..<last {
        let a = sound.pcm[(f - 1) * sound.channels], b = sound.pcm[f * sound.channels]
        if a < 0 && b >= 0 { crossings += 1 }
    }
    return Double(crossings) / (Double(last - first) / Double(sound.sampleRate))
}

/// Largest absolute sample.
func peak(_ pcm: [Int16]) -> Int { pcm.reduce(0) { max($0, abs(Int($1))) } }

/// The thrown SoundError, or nil if decoding succeeded.
func decodeError(_ path: String, maxDuration: Double = 30, maxBytes: Int = 16 * 1024 * 1024) -> SoundError? {
    do {
        _ = try SoundDecoder.decode(path: path, maxDuration: maxDuration, maxBytes: maxBytes)
        return nil
    } catch {
        return error
    }
}

/// The repository root, found from this file's location (Tests/InterludeSoundTests/Support.swift).
func repositoryRoot(file: String = #filePath) -> String {
    var url = URL(fileURLWithPath: file)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}
