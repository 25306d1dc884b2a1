import Foundation

/// Finds the project's `Config/` and `Sounds/` folders: `INTERLUDE_HOME` if set, else the nearest
/// parent of the executable (e.g. `.build/debug/interluded`) that holds them, else the source tree
/// this binary was built from.
enum ProjectResources {
    static func home(environment: [String: String]) -> String? {
        if let h = environment["INTERLUDE_HOME"], !h.isEmpty { return h }
        var candidates: [URL] = []
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = exe.deletingLastPathComponent()
        for _ in 0..<6 { candidates.append(dir); dir = dir.deletingLastPathComponent() }
        var src = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { src = src.deletingLastPathComponent() }
        candidates.append(src)
        return candidates.first { FileManager.default.fileExists(atPath: $0.appendingPathComponent("Config/interlude.json5").path) }?.path
    }
}
