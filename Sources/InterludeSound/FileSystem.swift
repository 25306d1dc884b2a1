import Glibc

/// Small POSIX helpers for ``SoundLookup``: path canonicalisation, existence checks and reading
/// `index.theme`. Internal: nothing here is part of the public API.
enum FileSystem {
    /// `realpath(3)`: absolute, with symlinks, `.` and `..` resolved; nil if the path (or a
    /// component) does not exist or cannot be searched.
    static func canonical(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// True when `path` (following symlinks) is a regular file.
    static func isRegularFile(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    /// True when something (any type, a dangling symlink included) is at `path`.
    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// The first `limit` bytes of a regular file as UTF-8 (invalid bytes repaired); nil if it
    /// cannot be opened or is not a regular file.
    static func readText(_ path: String, limit: Int = 64 * 1024) -> String? {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        var bytes = [UInt8](repeating: 0, count: limit)
        var count = 0
        while count < limit {
            let n = bytes.withUnsafeMutableBytes { buf in
                read(fd, buf.baseAddress! + count, limit - count)
            }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            count += n
        }
        return String(decoding: bytes[0..<count], as: UTF8.self)
    }

    /// `base/name` without a doubled slash.
    static func join(_ base: String, _ name: String) -> String {
        base.hasSuffix("/") ? base + name : base + "/" + name
    }

    /// Removes trailing slashes (but keeps "/" itself).
    static func trimTrailingSlashes(_ path: String) -> String {
        var p = path
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        return p
    }

    /// Lexical normalisation of an absolute path: drops empty and `.` components and applies
    /// `..` textually (never above "/"). Symlinks are not looked at.
    static func lexicallyNormalized(_ path: String) -> String {
        var parts: [Substring] = []
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            if component == "." { continue }
            if component == ".." { if !parts.isEmpty { parts.removeLast() }; continue }
            parts.append(component)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// True when `path` is `root` or lies below it. Both must be normalised the same way.
    static func isInside(_ path: String, root: String) -> Bool {
        if root == "/" { return path.hasPrefix("/") }
        return path == root || path.hasPrefix(root + "/")
    }
}
