// Shared by every fuzz target (Scripts/fuzz compiles this file into each fuzzer binary).
import Foundation

/// The deepest nesting of `[` and `{` in `bytes`, counting brackets inside strings too (an
/// over-estimate, which is what a cap wants).
func nestingDepth(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
    var depth = 0, deepest = 0
    for b in bytes {
        switch b {
        case UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1; deepest = max(deepest, depth)
        case UInt8(ascii: "]"), UInt8(ascii: "}"): depth = max(0, depth - 1)
        default: break
        }
    }
    return deepest
}

/// Inputs nested deeper than this are skipped (the harness returns -1, so libFuzzer does not keep
/// them). 0 (the default) means no cap. Set by Scripts/fuzz from INTERLUDE_FUZZ_MAX_DEPTH; it
/// exists so that a fuzzer can run past a known depth crash while its fix is on the way.
let fuzzDepthCap: Int = Int(ProcessInfo.processInfo.environment["INTERLUDE_FUZZ_MAX_DEPTH"] ?? "") ?? 0

/// Whether the input goes over ``fuzzDepthCap``.
func overDepthCap(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    fuzzDepthCap > 0 && nestingDepth(bytes) > fuzzDepthCap
}

/// A property the target checks failed: stop with the input's reproducer (libFuzzer writes it).
func fuzzCheck(_ ok: @autoclosure () -> Bool, _ what: @autoclosure () -> String) {
    if !ok() {
        FileHandle.standardError.write(Data("fuzz property failed: \(what())\n".utf8))
        abort()
    }
}

/// A scratch file of this process for the targets that read files (config loader, sound decoder):
/// in /dev/shm when there is one, so that each execution stays in memory.
func scratchPath(_ name: String) -> String {
    let dir = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    return "\(dir)/interlude-fuzz-\(getpid())-\(name)"
}

/// Writes `bytes` to `path` (replacing it).
func writeScratch(_ bytes: UnsafeBufferPointer<UInt8>, to path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    precondition(fd >= 0, "cannot write \(path)")
    var done = 0
    while done < bytes.count {
        let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
        precondition(n > 0, "cannot write \(path)")
        done += n
    }
    close(fd)
}
