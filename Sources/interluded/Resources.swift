import Foundation

/// Finds the folder that holds Interlude's `Config/` and `Sounds/`: `INTERLUDE_HOME` if set, else
/// the nearest parent of the executable that holds them, directly (a build tree:
/// `.build/debug/interluded` → the project) or as `share/interlude` (an installed prefix:
/// `PREFIX/bin/interluded` → `PREFIX/share/interlude`, see Scripts/install), else the source tree
/// this binary was built from.
enum ProjectResources {
    static func home(environment: [String: String]) -> String? {
        if let h = environment["INTERLUDE_HOME"], !h.isEmpty { return h }
        var candidates: [URL] = []
        let exe = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                      ?? CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = exe.deletingLastPathComponent()
        for _ in 0..<6 {
            candidates.append(dir)
            candidates.append(dir.appendingPathComponent("share/interlude"))
            dir = dir.deletingLastPathComponent()
        }
        var src = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { src = src.deletingLastPathComponent() }
        candidates.append(src)
        return candidates.first { FileManager.default.fileExists(atPath: $0.appendingPathComponent("Config/interlude.json5").path) }?.path
    }
}
