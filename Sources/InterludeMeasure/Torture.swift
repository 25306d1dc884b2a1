import Foundation
#if canImport(Glibc)
import Glibc
#endif

// Pure helpers of the torture suite (Scripts/torture, README "Torture"): no I/O, no clock. The
// driver (Sources/interlude-torture) does the faults and the measuring; these keep the books.

/// How a child process ended, decoded from a `waitpid` status word.
public enum ExitStatus: Equatable, Sendable, CustomStringConvertible {
    /// `exit(code)` or a return from `main`.
    case exited(Int32)
    /// Killed by a signal (SIGKILL = 9, SIGSEGV = 11, SIGILL = 4, …).
    case signaled(Int32)

    /// Decodes a raw `waitpid` status (glibc's `WIFEXITED`/`WEXITSTATUS`/`WTERMSIG` layout).
    /// Returns nil for a stopped or continued child (status word not of an ended process).
    public init?(raw status: Int32) {
        let signal = status & 0x7f
        if signal == 0 {
            self = .exited((status >> 8) & 0xff)
        } else if signal != 0x7f, (status & 0xffff) != 0xffff {
            self = .signaled(signal)
        } else {
            return nil
        }
    }

    /// A crash is any end other than the one the suite caused: a daemon the suite SIGKILLed must
    /// end by SIGKILL; one it stopped with SIGTERM must exit 0; one it left alone must not end at all
    /// (so any status then is a crash). `expected` is what the suite did.
    public func isCrash(expected: ExpectedEnd) -> Bool {
        switch (expected, self) {
        case (.killed, .signaled(SIGKILL)): return false
        case (.terminated, .exited(0)): return false
        case (.exitCode(let want), .exited(let got)): return want != got
        default: return true
        }
    }

    /// What the suite did to end the process.
    public enum ExpectedEnd: Equatable, Sendable {
        /// SIGKILL sent by the suite.
        case killed
        /// SIGTERM sent by the suite: a clean stop exits 0.
        case terminated
        /// The process was expected to exit by itself with this code (e.g. 78 for a bad config).
        case exitCode(Int32)
    }

    public var description: String {
        switch self {
        case let .exited(c): return "exit \(c)"
        case let .signaled(s): return "signal \(s)\(Self.signalNames[s].map { " (\($0))" } ?? "")"
        }
    }

    static let signalNames: [Int32: String] = [
        SIGILL: "SIGILL", SIGABRT: "SIGABRT", SIGBUS: "SIGBUS", SIGSEGV: "SIGSEGV", SIGKILL: "SIGKILL",
        SIGTERM: "SIGTERM", SIGTRAP: "SIGTRAP", SIGFPE: "SIGFPE", SIGPIPE: "SIGPIPE",
    ]
}

/// The books of acknowledged notifications across daemon kills (N15: nothing acknowledged is lost).
/// Keys are `app/identifier`. An acknowledged notification is *lost* if the center (and the pending
/// list) no longer has it when checked; it is *duplicated* if it was delivered (an event
/// `notificationDelivered` or `notificationUpdated` for it) more than once, or the center lists
/// it more than once.
public struct DeliveryLedger: Sendable, Equatable {
    public private(set) var acknowledged: Set<String> = []
    public private(set) var deliveries: [String: Int] = [:]
    public private(set) var lost: Set<String> = []
    public private(set) var duplicated: Set<String> = []

    public init() {}

    /// A request for `key` got its reply (the daemon acknowledged it, so it is persisted).
    public mutating func acknowledge(_ key: String) { acknowledged.insert(key) }

    /// A delivery event for `key` reached a subscriber.
    public mutating func delivered(_ key: String) {
        deliveries[key, default: 0] += 1
        if deliveries[key]! > 1 { duplicated.insert(key) }
    }

    /// The daemon's lists after a restart: `listed` holds every `app/identifier` of the center and
    /// the pending list, one element per entry (a key twice = listed twice). Every acknowledged key
    /// among `scope` must be there once.
    public mutating func check(scope: Set<String>, listed: [String]) {
        var counts: [String: Int] = [:]
        for k in listed { counts[k, default: 0] += 1 }
        for k in scope where acknowledged.contains(k) {
            switch counts[k, default: 0] {
            case 0: lost.insert(k)
            case 1: break
            default: duplicated.insert(k)
            }
        }
    }
}

/// One row of the torture table: what was tried, how many of those were lost or failed, and the
/// figures measured. `ok` is false when the row's own criterion failed (anything lost, duplicated,
/// stuck, or a crash).
public struct TortureRow: Sendable, Equatable {
    public var name: String
    public var tried: String
    public var failed: Int
    public var figures: String
    public var ok: Bool
    /// Why the row failed, when it did (one line each).
    public var problems: [String]

    public init(name: String, tried: String, failed: Int, figures: String, problems: [String] = []) {
        self.name = name; self.tried = tried; self.failed = failed; self.figures = figures
        self.problems = problems
        ok = failed == 0 && problems.isEmpty
    }

    /// The rows as one Markdown table (`| row | tried | lost/failed | figures |`), then one line per
    /// problem. Pipes inside cells are escaped.
    public static func table(_ rows: [TortureRow]) -> String {
        func cell(_ s: String) -> String { s.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "\n", with: " ") }
        var out = ["| row | tried | lost/failed | figures |", "|---|---|---:|---|"]
        for r in rows {
            out.append("| \(cell(r.name))\(r.ok ? "" : " **FAILED**") | \(cell(r.tried)) | \(r.failed) | \(cell(r.figures)) |")
        }
        let problems = rows.flatMap { r in r.problems.map { "- \(r.name): \($0)" } }
        if !problems.isEmpty { out.append(""); out += problems }
        return out.joined(separator: "\n")
    }
}

/// Bytes of broken and hostile files for the bad-files row.
public enum HostileFiles {
    /// A 44-byte canonical PCM WAV header (16-bit) that claims `dataBytes` bytes of samples.
    public static func wavHeader(dataBytes: UInt32, sampleRate: UInt32 = 48000, channels: UInt16 = 1) -> [UInt8] {
        var b: [UInt8] = []
        func u32(_ v: UInt32) { b += withUnsafeBytes(of: v.littleEndian, Array.init) }
        func u16(_ v: UInt16) { b += withUnsafeBytes(of: v.littleEndian, Array.init) }
        b += Array("RIFF".utf8); u32(dataBytes &+ 36); b += Array("WAVE".utf8)
        b += Array("fmt ".utf8); u32(16); u16(1); u16(channels); u32(sampleRate)
        u32(sampleRate * UInt32(channels) * 2); u16(channels * 2); u16(16)
        b += Array("data".utf8); u32(dataBytes)
        return b
    }

    /// A complete WAV: header and `seconds` of a 16-bit sine at `frequency` (amplitude 0.25).
    public static func wav(seconds: Double, frequency: Double = 660, sampleRate: UInt32 = 48000) -> [UInt8] {
        let n = Int(seconds * Double(sampleRate))
        var out = wavHeader(dataBytes: UInt32(n * 2), sampleRate: sampleRate)
        out.reserveCapacity(out.count + n * 2)
        for i in 0..<n {
            let v = Int16(0.25 * 32767 * sin(2 * Double.pi * frequency * Double(i) / Double(sampleRate)))
            out += withUnsafeBytes(of: v.littleEndian, Array.init)
        }
        return out
    }

    /// A valid zip archive holding one empty file `name` (stored, CRC 0): local header, central
    /// directory and end record.
    public static func zip(holding name: String = "sound.wav") -> [UInt8] {
        let n = Array(name.utf8)
        var b: [UInt8] = []
        func u32(_ v: UInt32) { b += withUnsafeBytes(of: v.littleEndian, Array.init) }
        func u16(_ v: UInt16) { b += withUnsafeBytes(of: v.littleEndian, Array.init) }
        u32(0x0403_4b50); u16(10); u16(0); u16(0); u16(0); u16(0); u32(0); u32(0); u32(0)
        u16(UInt16(n.count)); u16(0); b += n
        let central = UInt32(b.count)
        u32(0x0201_4b50); u16(20); u16(10); u16(0); u16(0); u16(0); u16(0); u32(0); u32(0); u32(0)
        u16(UInt16(n.count)); u16(0); u16(0); u16(0); u16(0); u32(0); u32(0); b += n
        let size = UInt32(b.count) - central
        u32(0x0605_4b50); u16(0); u16(0); u16(1); u16(1); u32(size); u32(central); u16(0)
        return b
    }

    /// A JSON5 config whose `audio` value is nested `depth` arrays deep.
    public static func nestedConfig(depth: Int) -> String {
        "{ audio: " + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + " }\n"
    }
}
