// Shared by every fuzz target (Scripts/fuzz compiles this file into each fuzzer binary).
import Foundation

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
