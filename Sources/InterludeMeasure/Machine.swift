import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a table of measurements says about the machine it ran on (Scripts/bench, Scripts/torture).
public struct MachineFacts: Sendable {
    public var cpus: Int
    public var cpu: String
    public var kernel: String
    public var memory: String
    /// `pactl info`'s server version, of `$PULSE_SERVER`.
    public var pulse: String
    public var sink: String
    /// When, `yyyy-MM-dd HH:mm UTC`.
    public var date: String

    /// Reads /proc/cpuinfo, /proc/meminfo, uname and `pactl info`.
    public static func read() -> MachineFacts {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "?" } ?? "?"
        var u = utsname()
        uname(&u)
        let kernel = withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
        let memKB = meminfo.split(separator: "\n").first { $0.hasPrefix("MemTotal:") }
            .flatMap { $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) } }
        let info = Spawn.output(["pactl", "info"])
        func field(_ name: String) -> String {
            info.split(separator: "\n").first { $0.hasPrefix(name + ":") }
                .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) } ?? "?"
        }
        let f = DateFormatter()
        f.dateFormat = "yyyy-MM-dd HH:mm 'UTC'"
        f.timeZone = TimeZone(identifier: "UTC")
        return MachineFacts(cpus: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), cpu: model, kernel: kernel,
                            memory: memKB.map { String(format: "%.0f GB", Double($0) / 1_048_576) } ?? "?",
                            pulse: field("Server Version"), sink: "default sink \(field("Default Sink"))", date: f.string(from: Date()))
    }
}

/// The 1-minute load average (/proc/loadavg), as printed there.
public func loadAverage() -> String {
    ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").first.map(String.init) ?? "?"
}
