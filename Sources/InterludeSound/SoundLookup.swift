import Glibc

/// Finds the file for a sound name or checks a sound path (POLICY.md S2).
///
/// A *name* (no `/`) is looked up, in this order, in:
/// 1. the app's sound folders (``appFolders``, in order),
/// 2. the user's sound folder (``userFolder``),
/// 3. the project's `Sounds/` folder (``projectFolder``),
/// 4. the freedesktop sound theme: the theme ``theme``, then the themes its `index.theme` lists in
///    `Inherits` (depth first, each once), then `freedesktop` last. A theme's files are looked
///    for in `DATADIR/sounds/THEME/SUBDIR/` for every `SUBDIR` its `index.theme` lists in
///    `Directories` (in that order) and then `stereo`, and for each subdir in every data dir of
///    ``dataDirs`` in order (so `$XDG_DATA_HOME` overrides `/usr/share` within a theme).
///    `index.theme` is read from the first data dir that has one for the theme.
///
/// In each folder, `NAME.disabled` is checked first (it means *silent on purpose* and wins over a
/// sound file beside it), then `NAME.EXT` for each of ``extensions``. If the name is found
/// nowhere, it is trimmed at its last `-` and the whole search runs again
/// (`message-new-instant` → `message-new` → `message`): a more specific name in a later folder
/// wins over a shorter name in an earlier one. A name that already ends in one of
/// ``extensions`` (`ping.caf`) tries that extension first and then the others.
///
/// An absolute *path* is accepted only when, after resolving symlinks and `..` with
/// `realpath(3)`, it lies inside one of the sound folders (the folders of 1–3 and every
/// `DATADIR/sounds`). The same check applies to a file found by name, so a symlink in a sound
/// folder cannot point outside. A relative path (a name containing `/`) is refused.
///
/// Returned paths are canonical (`realpath`). Lookup reads the file system on every call
/// (a few dozen `stat` calls); nothing is cached, so theme changes take effect at once.
/// Locale subfolders of sound themes are not searched.
public struct SoundLookup: Sendable {
    /// The outcome of ``resolve(_:)``.
    public enum Result: Sendable, Equatable {
        /// A file to decode: its canonical absolute path (S2). Not yet checked as audio (S1).
        case file(String)
        /// A `NAME.disabled` marker at this path: the sound is silent on purpose (S2); play
        /// nothing, not the default.
        case disabled(String)
        /// No folder has the name (or the path does not exist inside a folder): play the default.
        case notFound
        /// The name or path is not acceptable (S2), e.g. ``SoundError/outsideSoundFolders(path:)``:
        /// play the default and log the error's code.
        case refused(SoundError)
    }

    /// Extensions tried for a name, in order (S1 formats).
    public static let extensions = ["wav", "oga", "ogg", "flac", "aiff", "caf", "mp3", "opus"]

    /// The theme searched last, whatever the chain (freedesktop sound theme specification).
    public static let fallbackTheme = "freedesktop"

    /// The app's own sound folders, searched first, in order.
    public let appFolders: [String]
    /// The user's sound folder, searched after the app's.
    public let userFolder: String?
    /// The project's `Sounds/` folder with the default sounds, searched after the user's.
    public let projectFolder: String?
    /// XDG data dirs, most important first; sound themes live in `DIR/sounds/THEME`.
    public let dataDirs: [String]
    /// The selected sound theme's folder name (e.g. `"freedesktop"`, `"ocean"`).
    public let theme: String

    /// Creates a lookup over the given folders. Folders may be missing on disk (they are
    /// skipped); paths should be absolute (relative ones are taken from the working directory).
    /// - Parameters:
    ///   - appFolders: the app's sound folders, searched first.
    ///   - userFolder: the user's sound folder, or nil.
    ///   - projectFolder: the project's `Sounds/` folder, or nil.
    ///   - dataDirs: XDG data dirs, e.g. from ``standardDataDirs(environment:)``.
    ///   - theme: the sound theme to use before `freedesktop`.
    public init(
        appFolders: [String] = [],
        userFolder: String?,
        projectFolder: String?,
        dataDirs: [String],
        theme: String = "freedesktop"
    ) {
        self.appFolders = appFolders.map(FileSystem.trimTrailingSlashes)
        self.userFolder = userFolder.map(FileSystem.trimTrailingSlashes)
        self.projectFolder = projectFolder.map(FileSystem.trimTrailingSlashes)
        self.dataDirs = dataDirs.map(FileSystem.trimTrailingSlashes)
        self.theme = theme
    }

    /// The XDG data dirs in search order (XDG Base Directory spec): `$XDG_DATA_HOME` (default
    /// `$HOME/.local/share`), then each entry of `$XDG_DATA_DIRS` (default
    /// `/usr/local/share:/usr/share`). Empty variables count as unset; relative entries are
    /// ignored, as the spec says; duplicates are dropped. Pure: reads only `environment`.
    public static func standardDataDirs(environment: [String: String]) -> [String] {
        var dirs: [String] = []
        func add(_ dir: String) {
            let d = FileSystem.trimTrailingSlashes(dir)
            if d.hasPrefix("/") && !dirs.contains(d) { dirs.append(d) }
        }
        if let home = environment["XDG_DATA_HOME"], !home.isEmpty {
            add(home)
        } else if let home = environment["HOME"], !home.isEmpty {
            add(FileSystem.join(home, ".local/share"))
        }
        let system = environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "/usr/local/share:/usr/share"
        for entry in system.split(separator: ":") { add(String(entry)) }
        return dirs
    }

    /// Resolves a sound name or an absolute path (S2). Never throws and never crashes; see the
    /// type's documentation for the order. Names never contain `/`; an empty name is
    /// ``Result/notFound``.
    public func resolve(_ nameOrPath: String) -> Result {
        if nameOrPath.hasPrefix("/") {
            return resolvePath(nameOrPath)
        }
        if nameOrPath.isEmpty { return .notFound }
        if nameOrPath.contains("/") || nameOrPath.utf8.contains(0) || nameOrPath == "." || nameOrPath == ".." {
            return .refused(.outsideSoundFolders(path: nameOrPath))
        }
        return resolveName(nameOrPath)
    }

    // MARK: - Paths

    private func resolvePath(_ path: String) -> Result {
        let roots = soundRoots()
        if let real = FileSystem.canonical(path) {
            if roots.contains(where: { FileSystem.isInside(real, root: $0) }) {
                return .file(real)
            }
            return .refused(.outsideSoundFolders(path: path))
        }
        // Nothing there (or not searchable). Decide between "missing inside" and "outside"
        // lexically, against the folders both as configured and canonical.
        let lexical = FileSystem.lexicallyNormalized(path)
        let lexicalRoots = roots + configuredRoots().map(FileSystem.lexicallyNormalized)
        if lexicalRoots.contains(where: { FileSystem.isInside(lexical, root: $0) }) {
            return .notFound
        }
        return .refused(.outsideSoundFolders(path: path))
    }

    /// Absolute forms of the configured folders (relative ones against the working directory).
    private func configuredRoots() -> [String] {
        var folders = appFolders
        if let userFolder { folders.append(userFolder) }
        if let projectFolder { folders.append(projectFolder) }
        folders += dataDirs.map { FileSystem.join($0, "sounds") }
        return folders.map { folder in
            if folder.hasPrefix("/") { return folder }
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            guard getcwd(&buffer, buffer.count) != nil else { return folder }
            let cwd = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            return FileSystem.join(cwd, folder)
        }
    }

    /// Canonical paths of the folders that exist: the roots a sound file must lie inside.
    private func soundRoots() -> [String] {
        configuredRoots().compactMap(FileSystem.canonical)
    }

    // MARK: - Names

    private func resolveName(_ name: String) -> Result {
        var stem = name
        var extensions = Self.extensions
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            let ext = String(name[name.index(after: dot)...])
            if let index = extensions.firstIndex(of: ext) {
                stem = String(name[..<dot])
                extensions.remove(at: index)
                extensions.insert(ext, at: 0)
            }
        }
        let folders = searchFolders()
        while !stem.isEmpty {
            for folder in folders {
                let base = FileSystem.join(folder, stem)
                let disabled = base + ".disabled"
                if FileSystem.exists(disabled) {
                    return .disabled(FileSystem.canonical(disabled) ?? disabled)
                }
                for ext in extensions {
                    let candidate = base + "." + ext
                    if FileSystem.isRegularFile(candidate) {
                        return checked(candidate)
                    }
                }
            }
            guard let dash = stem.lastIndex(of: "-") else { break }
            stem = String(stem[..<dash])
        }
        return .notFound
    }

    /// A found file, if its real location is inside a sound folder.
    private func checked(_ candidate: String) -> Result {
        guard let real = FileSystem.canonical(candidate) else { return .notFound }
        if soundRoots().contains(where: { FileSystem.isInside(real, root: $0) }) {
            return .file(real)
        }
        return .refused(.outsideSoundFolders(path: candidate))
    }

    /// Every folder a name is looked for in, in order (app, user, project, theme chain).
    func searchFolders() -> [String] {
        var folders = appFolders
        if let userFolder { folders.append(userFolder) }
        if let projectFolder { folders.append(projectFolder) }
        for themeName in themeChain() {
            let subdirs = themeIndex(themeName)?.directories ?? []
            let all = subdirs.contains("stereo") ? subdirs : subdirs + ["stereo"]
            for subdir in all {
                for dataDir in dataDirs {
                    folders.append(FileSystem.join(dataDir, "sounds/\(themeName)/\(subdir)"))
                }
            }
        }
        return folders
    }

    /// The selected theme, its `Inherits` ancestors depth first (each once, at most 32
    /// themes), then `freedesktop` if not already there.
    func themeChain() -> [String] {
        var chain: [String] = []
        func visit(_ name: String, depth: Int) {
            guard Self.isSafeComponent(name), !chain.contains(name), depth < 16, chain.count < 32 else { return }
            chain.append(name)
            for parent in themeIndex(name)?.inherits ?? [] {
                visit(parent, depth: depth + 1)
            }
        }
        visit(theme, depth: 0)
        visit(Self.fallbackTheme, depth: 0)
        return chain
    }

    /// The `[Sound Theme]` group of the first `DATADIR/sounds/THEME/index.theme` found.
    func themeIndex(_ themeName: String) -> ThemeIndex? {
        for dataDir in dataDirs {
            let path = FileSystem.join(dataDir, "sounds/\(themeName)/index.theme")
            if let text = FileSystem.readText(path) {
                return ThemeIndex(parsing: text)
            }
        }
        return nil
    }

    /// A theme or file name that cannot leave its folder.
    static func isSafeComponent(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.utf8.contains(0)
    }
}

/// The keys of an `index.theme` that lookup uses (desktop-entry syntax, group `[Sound Theme]`).
struct ThemeIndex: Equatable {
    /// Parent themes, in order.
    var inherits: [String] = []
    /// Subfolders holding sounds, in order; only relative paths without `..`.
    var directories: [String] = []

    init(inherits: [String] = [], directories: [String] = []) {
        self.inherits = inherits
        self.directories = directories
    }

    /// Parses `index.theme` text. Unknown groups and keys, comments and localised keys are
    /// ignored; lists are comma-separated.
    init(parsing text: String) {
        var inGroup = false
        for rawLine in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                inGroup = line == "[Sound Theme]"
                continue
            }
            guard inGroup, let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingWhitespace()
            let values = line[line.index(after: eq)...]
                .split(separator: ",")
                .map { $0.trimmingWhitespace() }
                .filter { !$0.isEmpty }
            switch key {
            case "Inherits":
                inherits = values.filter(SoundLookup.isSafeComponent)
            case "Directories":
                directories = values.filter { dir in
                    !dir.hasPrefix("/") && !dir.split(separator: "/").contains("..") && !dir.utf8.contains(0)
                }
            default:
                continue
            }
        }
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
