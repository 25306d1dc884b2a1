import Foundation
import InterludePolicy

/// A bad config file: names the file, the line and the key (or the syntax error's place).
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    /// 1-based; 0 when the error is about the file or folder as a whole (no line to go to).
    public var line: Int
    /// Dotted key path, or nil for a syntax error.
    public var key: String?
    public var message: String
    /// Stable code: `configSyntax`, `configUnknownKey`, `configBadValue`, `configUnreadable`,
    /// `configNotFound` (a config folder named on purpose is not there).
    public var code: String
    /// "file:line: key 'k': message [code]"; without ":line" when there is no line (0).
    public var description: String {
        file + (line > 0 ? ":\(line)" : "") + ": " + (key.map { "key '\($0)': " } ?? "") + message + " [\(code)]"
    }
    /// Makes an error; `code` is one of the stable codes above.
    public init(file: String, line: Int, key: String?, message: String, code: String) {
        self.file = file; self.line = line; self.key = key; self.message = message; self.code = code
    }
}

/// Loaded, validated configuration: every number the rules name.
public struct InterludeConfig: Sendable {
    /// The merged document (defaults from the schema, then each file in order).
    public var document: ConfigValue
    /// The files that were read, lowest precedence first.
    public var files: [String]
    /// Which file last set each dotted key, at every depth (`server`, `server.maxSessions`; a
    /// top-level key is its section): two files may set different keys of one section, so the
    /// section's file does not say where a key inside it came from (``place(of:)``).
    public var keySources: [String: String] = [:]
    /// The notification policy's numbers and modes (N-rules), decoded from the top-level keys.
    public var notificationPolicy = NotificationPolicyConfig()

    /// A number or integer key (`audio.duckLevelDb`). Falls back to the schema default.
    public func number(_ path: String) -> Double {
        if case let .number(n)? = lookup(path) { return n }
        switch ConfigSchema.index[path]?.kind {
        case let .number(d, _, _)?: return d
        case let .integer(d, _, _)?: return Double(d)
        default: preconditionFailure("no number key \(path)")
        }
    }
    public func string(_ path: String) -> String? {
        if case let .string(s)? = lookup(path) { return s }
        if case let .string(d, _)? = ConfigSchema.index[path]?.kind { return d }
        return nil
    }
    public func strings(_ path: String) -> [String] {
        if case let .array(a)? = lookup(path) { return a.compactMap { if case let .string(s) = $0 { return s } else { return nil } } }
        if case let .strings(d)? = ConfigSchema.index[path]?.kind { return d }
        return []
    }
    /// Where a dotted key was set: the file that last set the key itself (or, for a path into a
    /// list such as `focusModes.sleep.schedule[0]`, its deepest key a file set) and the line of
    /// that key; ("the built-in defaults", 1) when no file set it. (It used to name the file that
    /// last set the top-level section, which is another file when two files set different keys
    /// of one section.)
    public func place(of path: String) -> (file: String, line: Int) {
        var v: ConfigValue? = document
        var line = 1
        var prefix = ""
        var file: String?
        for part in path.split(separator: ".") {
            guard case let .object(members)? = v, let m = members.last(where: { $0.key == part }),
                  let setBy = keySources[prefix.isEmpty ? String(part) : prefix + "." + part] else {
                // A key no file set is the schema's default; a list index (`schedule[0]`) is
                // inside the list a file set.
                if !part.contains("[") { return ("the built-in defaults", 1) }
                break
            }
            prefix = prefix.isEmpty ? String(part) : prefix + "." + part
            file = setBy
            line = m.line
            v = m.value
        }
        return file.map { ($0, line) } ?? ("the built-in defaults", 1)
    }

    /// Where a key path with list indices was set (`focusModes.work.schedule[0].end`,
    /// `entitledCriticalApps[1].executablePath`): the line of its deepest key written in a file (a
    /// member of an object inside a list has a line of its own; an item that is a plain value
    /// has none, so it is the line of the list's key), in the file that set the key holding the
    /// list (a list is replaced whole by a later file). ("the built-in defaults", 1) when no file
    /// set it. Errors found by decoding (a time that is no HH:MM) named the line of the
    /// top-level key before (a stranger's `end: "9am"` on line 8 was reported on line 3).
    public func place(ofKeyPath path: String) -> (file: String, line: Int) {
        walk(path).place
    }

    /// The value at a key path with list indices (``place(ofKeyPath:)``), nil when there is none:
    /// what an error names as the value given (`must be a string, not 5`).
    public func value(atKeyPath path: String) -> ConfigValue? {
        walk(path).value
    }

    /// Follows a key path with list indices through the document: where its deepest key was
    /// written, and the value at its end (nil when the path leads nowhere).
    private func walk(_ path: String) -> (place: (file: String, line: Int), value: ConfigValue?) {
        var v: ConfigValue? = document
        var reached = true
        var line: Int?
        var dotted = ""
        var file: String?
        var inList = false
        walk: for part in path.split(separator: ".") {
            // "schedule[0][1]" → the key "schedule", then the indices 0 and 1.
            let key = part.prefix { $0 != "[" }
            let indices = part.dropFirst(key.count).split(separator: "]").compactMap { Int($0.drop { $0 == "[" }) }
            if !key.isEmpty {
                guard case let .object(members)? = v, let m = members.last(where: { $0.key == key }) else { reached = false; break walk }
                line = m.line
                v = m.value
                if !inList {
                    dotted = dotted.isEmpty ? String(key) : dotted + "." + key
                    file = keySources[dotted] ?? file
                }
            }
            for i in indices {
                guard case let .array(items)? = v, items.indices.contains(i) else { reached = false; break walk }
                v = items[i]
                inList = true
            }
        }
        guard let file, let line else { return (("the built-in defaults", 1), reached ? v : nil) }
        return ((file, line), reached ? v : nil)
    }

    /// Records the file that set each dotted key of `value` (an object merged over the config).
    mutating func recordSources(of value: ConfigValue, from name: String, under path: String = "") {
        guard case let .object(members) = value else { return }
        for m in members {
            let p = path.isEmpty ? m.key : path + "." + m.key
            keySources[p] = name
            recordSources(of: m.value, from: name, under: p)
        }
    }

    public func lookup(_ path: String) -> ConfigValue? {
        var v: ConfigValue? = document
        for part in path.split(separator: ".") { v = v?[String(part)] }
        return v
    }

    /// The keys of ``ConfigSchema/restartOnly`` whose value here differs from `running`'s (the
    /// config the daemon started with), in schema order: what a reload cannot put in force.
    public func restartOnlyDifferences(from running: InterludeConfig) -> [String] {
        ConfigSchema.restartOnly.filter { valueText($0) != running.valueText($0) }
    }

    /// Pairs of limits where one bounds a part of what the other bounds (a per-app or per-client
    /// limit and its total), for ``contradictions``.
    public static let limitPairs: [(part: String, total: String)] = [
        ("maxPendingPerApp", "maxPendingTotal"),
        ("bursts.maxDeliveredPerApp", "bursts.maxDeliveredTotal"),
        ("server.maxSessionsPerClient", "server.maxSessions"),
        ("server.maxClientsPerProcess", "server.maxClients"),
    ]

    /// Settings that work against each other or against the user: a per-app or per-client limit
    /// above its total (the total binds and the part's value never takes effect), and
    /// `server.userTools` without the interlude CLI (the CLI could then not even reload the config
    /// back). Accepted (either may be what the user meant), but said: the daemon logs each at
    /// start and on a reload, and `config.reload` returns them (`warnings`). Empty when none.
    public var contradictions: [String] { contradictions(runningSince: nil) }

    /// ``contradictions`` of this config read by a reload of a daemon that started with
    /// `started`: a pair with a restart-only key (``ConfigSchema/restartOnly``) whose new value
    /// is not in force yet is said as what it will be after a restart, with the values in force
    /// until then.
    public func contradictions(runningSince started: InterludeConfig?) -> [String] {
        var out = limitContradictions(runningSince: started)
        // Records that may not be forgotten without the user: those of connected apps and of
        // apps with notifications in the center or waiting for a trigger.
        let held = ["server.maxClients", "bursts.maxDeliveredTotal", "maxPendingTotal"]
        let heldTotal = held.map { Int(number($0)) }.reduce(0, +)
        if Int(number("maxApps")) <= heldTotal {
            let (file, line) = lookup("maxApps") != nil ? place(of: "maxApps") : ("the default", 0)
            out.append("maxApps \(Int(number("maxApps"))) (\(line > 0 ? "\(file):\(line)" : file)) is not above \(held.joined(separator: " + ")) "
                       + "(\(heldTotal)): connected apps and apps with notifications could hold every record, and new apps be refused (limitReached)")
        }
        if !strings("server.userTools").contains("org.interlude.CLI") {
            let (file, line) = place(of: "server.userTools")
            out.append("server.userTools (\(file):\(line)) does not name org.interlude.CLI: the interlude CLI can no longer change "
                       + "settings or focus, or reload the config (send the daemon SIGHUP to reload it)")
        }
        return out
    }

    /// The limit pairs of ``contradictions(runningSince:)``.
    func limitContradictions(runningSince started: InterludeConfig?) -> [String] {
        Self.limitPairs.compactMap { pair in
            let part = number(pair.part), total = number(pair.total)
            guard part > total else { return nil }
            func origin(_ key: String) -> String {
                guard lookup(key) != nil else { return "the default" }
                let (file, line) = place(of: key)
                return "\(file):\(line)"
            }
            let said = "\(pair.part) \(Int(part)) (\(origin(pair.part))) is above \(pair.total) \(Int(total)) (\(origin(pair.total))): "
            // A restart-only key keeps its starting value until a restart (a reload's config).
            let waiting = [pair.part, pair.total].filter { key in
                ConfigSchema.restartOnly.contains(key) && started.map { $0.number(key) != number(key) } == true
            }
            guard let started, !waiting.isEmpty else { return said + "the total binds, so in effect it is at most \(Int(total))" }
            return said + "after a restart the total binds, so it will be at most \(Int(total)); until then "
                + waiting.map { "\($0) stays \(Int(started.number($0)))" }.joined(separator: " and ")
        }
    }

    /// A key's value as text, for comparing configs (numbers, strings and string lists).
    func valueText(_ path: String) -> String {
        switch ConfigSchema.index[path]?.kind {
        case .number?, .integer?: "\(number(path))"
        case .strings?: strings(path).joined(separator: "\u{1F}")
        default: string(path) ?? "null"
        }
    }

    /// The audio arbiter's numbers (A2, A8, A9).
    public var audioPolicy: AudioPolicyConfig {
        AudioPolicyConfig(duckLevelDb: number("audio.duckLevelDb"),
                          duckRampDown: number("audio.duckRampDownMs") / 1000,
                          duckRampUp: number("audio.duckRampUpMs") / 1000,
                          enforcementGrace: number("audio.enforcementGraceMs") / 1000,
                          transientExpiry: number("audio.transientExpirySeconds"))
    }
}

/// Reads config files in XDG order and validates them against ``ConfigSchema``.
public enum ConfigLoader {
    /// The file name looked for in each config folder.
    public static let fileName = "interlude.json5"

    /// The folders to read, lowest precedence first: the project's `Config/` (built-in defaults),
    /// `$XDG_CONFIG_DIRS/interlude` (last listed lowest), `$XDG_CONFIG_HOME/interlude`
    /// (default `~/.config/interlude`), then `override` (`--config DIR`) or `INTERLUDE_CONFIG_DIR`.
    public static func folders(builtin: String?, override: String?, environment: [String: String]) -> [String] {
        var out: [String] = []
        if let builtin { out.append(builtin) }
        let dirs = (environment["XDG_CONFIG_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/etc/xdg").split(separator: ":")
        out += dirs.reversed().map { "\($0)/interlude" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        out.append((environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "\(home)/.config") + "/interlude")
        if let o = override ?? environment["INTERLUDE_CONFIG_DIR"] { out.append(o) }
        return out
    }

    /// Checks that the config folder named on purpose exists: `override` (`--config DIR`), else
    /// `INTERLUDE_CONFIG_DIR`. A typo, or a folder deleted since, would otherwise run silently on
    /// the remaining files (the user's settings back at their defaults). Checked at start and on
    /// every reload (``folders(builtin:override:environment:)`` names the same folder).
    /// On a reload, `inForce` (the files the running config was read from: at start, or at the
    /// last reload that was taken) adds one more check: a file of the named folder that is in
    /// force and gone now is refused the same way (deleting the file and keeping its folder
    /// dropped the user's settings silently; so did deleting a file a reload had added).
    /// - Throws: ``ConfigError`` `configNotFound` naming the path and where it was given.
    public static func checkNamedFolder(override: String?, environment: [String: String],
                                        inForce: [String] = []) throws(ConfigError) {
        let named: (source: String, path: String)?
        if let override, !override.isEmpty { named = ("--config", override) }
        else if let dir = environment["INTERLUDE_CONFIG_DIR"], !dir.isEmpty { named = ("INTERLUDE_CONFIG_DIR", dir) }
        else { named = nil }
        guard let named else { return }
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: named.path, isDirectory: &isDir) else {
            throw ConfigError(file: named.path, line: 0, key: nil, message: "no such folder (given with \(named.source))", code: "configNotFound")
        }
        guard isDir.boolValue else {
            throw ConfigError(file: named.path, line: 0, key: nil, message: "is not a folder (given with \(named.source))", code: "configNotFound")
        }
        let folder = named.path.hasSuffix("/") ? named.path : named.path + "/"
        // Gone: not there at all (lstat). A link to nothing is there, and the load says what it is.
        var st = stat()
        for file in inForce where file.hasPrefix(folder) && lstat(file, &st) != 0 {
            throw ConfigError(file: file, line: 0, key: nil,
                              message: "in force and gone now (its folder was given with \(named.source)); put it back, or restart the daemon to run without it",
                              code: "configNotFound")
        }
    }

    /// Loads `interlude.json5` from each folder that has one (missing files are skipped), then
    /// applies `overlay` (a scenario's `config`) last.
    /// - Throws: ``ConfigError`` for the first bad file.
    public static func load(folders: [String], overlay: (name: String, value: ConfigValue)? = nil) throws(ConfigError) -> InterludeConfig {
        var config = InterludeConfig(document: .object([]), files: [])
        for folder in folders {
            let path = folder.hasSuffix(".json5") || folder.hasSuffix(".json") ? folder : "\(folder)/\(fileName)"
            // Missing: skipped. Only a regular file is read: a FIFO would block the daemon's start
            // (or reload) until something wrote to it, and a device is not a config.
            var st = stat()
            guard stat(path, &st) == 0 else {
                // Missing is skipped; a symbolic link to nothing (or a loop of them) is there
                // and unreadable: skipping it would run silently without the user's settings.
                let why = errno
                var link = stat()
                guard lstat(path, &link) == 0 else { continue }
                let what = why == ELOOP ? "a loop of symbolic links" : "a symbolic link to nothing (\(String(cString: strerror(why))))"
                throw ConfigError(file: path, line: 0, key: nil, message: "is \(what)", code: "configUnreadable")
            }
            let text: String
            if st.st_mode & S_IFMT != S_IFREG {
                let kind = st.st_mode & S_IFMT == S_IFDIR ? "a folder" : st.st_mode & S_IFMT == S_IFIFO ? "a FIFO"
                    : st.st_mode & S_IFMT == S_IFSOCK ? "a socket" : "a device"
                throw ConfigError(file: path, line: 0, key: nil, message: "is \(kind), not a file", code: "configUnreadable")
            }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigError(file: path, line: 0, key: nil, message: "cannot read: \(String(cString: strerror(errno)))", code: "configUnreadable")
            }
            guard let decoded = String(data: data, encoding: .utf8) else {
                let (line, column) = ConfigLoader.firstInvalidUTF8(in: Array(data))
                throw ConfigError(file: path, line: line, key: nil, message: "not UTF-8 text (column \(column))", code: "configUnreadable")
            }
            text = decoded
            try apply(&config, text: text, name: path)
        }
        if let overlay {
            try validate(overlay.value, path: [], file: overlay.name, line: 1)
            config.document = merge(config.document, overlay.value)
            config.files.append(overlay.name)
            config.recordSources(of: overlay.value, from: overlay.name)
        }
        try decodeNotificationPolicy(&config)
        try checkFocusModeNames(config)
        // The focus a desktop app's Inhibit turns on, when a file sets it, must be one of the focus
        // modes: else each Inhibit was refused as the app's mistake (InvalidArgs) for a config
        // error. (Not the schema's default alone: a scenario's config may define other modes and
        // never use the bus.)
        if config.lookup("bus.inhibitFocus") != nil, let focus = config.string("bus.inhibitFocus"),
           config.notificationPolicy.focusModes[focus] == nil {
            let (file, line) = config.place(of: "bus.inhibitFocus")
            throw ConfigError(file: file, line: line, key: "bus.inhibitFocus",
                              message: "unknown focus \"\(focus)\" (the focus modes: \(config.notificationPolicy.focusModes.keys.sorted().joined(separator: ", ")))",
                              code: "configBadValue")
        }
        return config
    }

    /// N7: a focus mode is turned on by its name (`focus.set`, `interlude focus NAME`) and shown in
    /// `status` and the log: a name that is empty, only spaces, or holds a control character or a
    /// line separator (``NotificationPolicy/breaksALine(_:)``) is no name a user can type or read.
    /// Refused with the file and line of the name (a stranger's find: such names were taken).
    static func checkFocusModeNames(_ config: InterludeConfig) throws(ConfigError) {
        guard case let .object(top) = config.document, let modes = top.last(where: { $0.key == "focusModes" }),
              case let .object(named) = modes.value else { return }
        for m in named {
            let why: String
            if m.key.allSatisfy({ $0 == " " }) {
                why = "a focus mode's name must not be empty or only spaces"
            } else if let u = m.key.unicodeScalars.first(where: NotificationPolicy.breaksALine) {
                why = "a focus mode's name holds \(NotificationPolicy.codePoint(u)) (a control character or line separator); a name is one line of text"
            } else { continue }
            throw ConfigError(file: config.keySources["focusModes.\(m.key)"] ?? config.place(of: "focusModes").file, line: m.line,
                              key: "focusModes", message: why, code: "configBadValue")
        }
    }

    /// Decodes the notification keys as `NotificationPolicyConfig` and checks what the schema
    /// cannot (time zones, times of day, entitlement shapes). Errors name the top-level key's
    /// file and line.
    static func decodeNotificationPolicy(_ config: inout InterludeConfig) throws(ConfigError) {
        guard case let .object(members) = config.document else { return }
        let keys = Set(ConfigSchema.notifications.map { String($0.path.split(separator: ".").first!) })
        let subset = members.filter { keys.contains($0.key) }
        // The deepest key of the path a file wrote, indices included (``InterludeConfig/place(ofKeyPath:)``).
        let document = config
        func where_(_ key: String) -> (String, Int) {
            let (file, line) = document.place(ofKeyPath: key)
            return file == "the built-in defaults" ? (config.files.last ?? "config", 1) : (file, line)
        }
        do {
            let p = try JSONDecoder().decode(NotificationPolicyConfig.self, from: Data(ConfigValue.object(subset).jsonText.utf8))
            if let problem = p.problems.first {
                // "key: what is wrong": the key goes to the error's key, the rest is its message
                // (it used to be the whole line, so the key was printed twice).
                let split = problem.range(of: ": ")
                let key = split.map { String(problem[..<$0.lowerBound]) } ?? ""
                let message = split.map { String(problem[$0.upperBound...]) } ?? problem
                let (file, line) = where_(key)
                throw ConfigError(file: file, line: line, key: key, message: message, code: "configBadValue")
            }
            config.notificationPolicy = p
        } catch let e as ConfigError { throw e } catch let DecodingError.dataCorrupted(c) {
            let key = ConfigLoader.keyPath(c.codingPath)
            let (file, line) = where_(key)
            throw ConfigError(file: file, line: line, key: key, message: c.debugDescription, code: "configBadValue")
        } catch let DecodingError.typeMismatch(t, c) {
            let key = ConfigLoader.keyPath(c.codingPath)
            let (file, line) = where_(key)
            let given = document.value(atKeyPath: key).map { ", not \(ConfigLoader.shown($0))" } ?? ""
            throw ConfigError(file: file, line: line, key: key, message: "must be \(ConfigLoader.plainType(t))\(given)", code: "configBadValue")
        } catch let DecodingError.keyNotFound(k, c) {
            let key = ConfigLoader.keyPath(c.codingPath + [k])
            let (file, line) = where_(ConfigLoader.keyPath(c.codingPath.isEmpty ? [k] : c.codingPath))  // the object it is missing from
            throw ConfigError(file: file, line: line, key: key, message: "is required", code: "configBadValue")
        } catch let DecodingError.valueNotFound(t, c) {
            let key = ConfigLoader.keyPath(c.codingPath)
            let (file, line) = where_(key)
            throw ConfigError(file: file, line: line, key: key, message: "must be \(ConfigLoader.plainType(t)), not null", code: "configBadValue")
        } catch {
            let (file, line) = where_("")
            throw ConfigError(file: file, line: line, key: nil, message: "\(error)", code: "configBadValue")
        }
    }

    /// A decoding path as a config key: `entitledCriticalApps[0].app`.
    static func keyPath(_ path: [any CodingKey]) -> String {
        path.reduce(into: "") { out, k in
            if let i = k.intValue { out += "[\(i)]" } else { out += (out.isEmpty ? "" : ".") + k.stringValue }
        }
    }

    /// A decoding type as the config's reader knows it ("a list", "a string"), never a Swift name.
    static func plainType(_ t: Any.Type) -> String {
        let name = String(describing: t)
        if name.hasPrefix("Array") || name.hasPrefix("[") && !name.contains(":") { return "a list" }
        if name.hasPrefix("Dictionary") || name.hasPrefix("[") { return "an object" }
        switch name {
        case "String": return "a string"
        case "Bool": return "true or false"
        case "Int", "Double", "Float", "Int64", "UInt32": return "a number"
        default: return "a value of another kind"
        }
    }

    /// Where the first byte that is not UTF-8 stands: line and column, both 1-based (the column
    /// counts bytes). Lines are counted up to the bad byte, so the editor can go there.
    static func firstInvalidUTF8(in bytes: [UInt8]) -> (line: Int, column: Int) {
        var line = 1, lineStart = 0, offset = 0
        // The scalars before the error, each counted by its UTF-8 width, give the bad byte's offset.
        _ = transcode(bytes.makeIterator(), from: UTF8.self, to: UTF32.self, stoppingOnError: true) { unit in
            guard let scalar = Unicode.Scalar(unit) else { return }
            offset += UTF8.width(scalar)
            if scalar == "\n" { line += 1; lineStart = offset }
        }
        return (line, offset - lineStart + 1)
    }

    /// Parses and validates one file's text and merges it over `config`.
    public static func apply(_ config: inout InterludeConfig, text: String, name: String) throws(ConfigError) {
        let value: ConfigValue
        do { value = try JSON5.parse(text) } catch {
            throw ConfigError(file: name, line: error.line, key: nil, message: "\(error.message) (column \(error.column))", code: "configSyntax")
        }
        guard case .object = value else {
            throw ConfigError(file: name, line: 1, key: nil, message: "the file must hold one object", code: "configSyntax")
        }
        try validate(value, path: [], file: name, line: 1)
        config.document = merge(config.document, value)
        config.files.append(name)
        config.recordSources(of: value, from: name)
    }

    /// Checks every member against the schema: known key, right type, in range.
    static func validate(_ v: ConfigValue, path: [String], file: String, line: Int) throws(ConfigError) {
        switch v {
        case let .object(members):
            for m in members {
                let p = path + [m.key]
                let dotted = p.joined(separator: ".")
                guard let spec = ConfigSchema.key(for: p) else {
                    throw ConfigError(file: file, line: m.line, key: dotted, message: "unknown key", code: "configUnknownKey")
                }
                try check(m.value, spec: spec, path: p, file: file, line: m.line)
            }
        default:
            break
        }
    }

    static func check(_ v: ConfigValue, spec: ConfigKey, path: [String], file: String, line: Int) throws(ConfigError) {
        let dotted = path.joined(separator: ".")
        func bad(_ m: String) -> ConfigError { ConfigError(file: file, line: line, key: dotted, message: m, code: "configBadValue") }
        switch (spec.kind, v) {
        case let (.number(_, r, unit), .number(n)):
            guard r.contains(n) else { throw bad("\(plain(n)) is out of range \(plain(r.lowerBound))…\(plain(r.upperBound))\(unitText(unit))") }
        case let (.integer(_, r, unit), .number(n)):
            guard n.rounded() == n, n >= Double(r.lowerBound), n <= Double(r.upperBound) else {
                throw bad("must be a whole number in \(r.lowerBound)…\(r.upperBound)\(unitText(unit)), not \(plain(n))")
            }
        case (.bool, .bool): break
        case let (.string(_, allowed), .string(s)):
            if let allowed, !allowed.contains(s) { throw bad("'\(s)' is not one of \(allowed.joined(separator: ", "))") }
        // null stands for "not set" only where the default is unset too (`sounds.userFolder`,
        // `remote.broker`); a key with a default of its own (`authorization.default`) is named.
        case (.string(default: nil, _), .null): break
        case let (.strings, .array(items)):
            // The item's index in the key (a plain value has no line of its own: the list's key's line).
            for (i, item) in items.enumerated() {
                guard case .string = item else {
                    throw ConfigError(file: file, line: line, key: dotted + "[\(i)]", message: "must be a string (in a list of strings), not \(shown(item))",
                                      code: "configBadValue")
                }
            }
        case (.object, .object):
            try validate(v, path: path, file: file, line: line)
        case let (.json(def), .null) where def != "null":
            // As for a string key: null is "not set" only where the default is unset.
            throw bad("must not be null (its default is \(def))")
        case (.json, _): break
        case let (.objects, .array(items)):
            for (i, item) in items.enumerated() {
                guard case .object = item else {
                    throw ConfigError(file: file, line: line, key: dotted + "[\(i)]", message: "must be an object (in a list of objects), not \(shown(item))",
                                      code: "configBadValue")
                }
                var p = path; p[p.count - 1] += "[]"
                do { try validate(item, path: p, file: file, line: line) } catch {
                    // The schema's `cooldown[]` is the error's `cooldown[1]`: which one of the list.
                    var e = error
                    if let k = e.key, k.hasPrefix(dotted + "[]") { e.key = dotted + "[\(i)]" + k.dropFirst(dotted.count + 2) }
                    throw e
                }
            }
        default:
            throw bad("must be \(describe(spec.kind)), not \(shown(v))")
        }
    }

    /// The value given, as the message names it: a scalar as written (a string quoted and cut to
    /// 40 characters), a list or an object by its kind.
    static func shown(_ v: ConfigValue) -> String {
        switch v {
        case .null: return "null"
        case let .bool(b): return b ? "true" : "false"
        case let .number(n): return plain(n)
        case let .string(s): return "\"" + (s.count > 40 ? String(s.prefix(40)) + "…" : s) + "\""
        case .array: return "a list"
        case .object: return "an object"
        }
    }

    /// " UNIT" after a range, or nothing when the unit is the range itself (a volume's "0…1": the
    /// message said "out of range 0…1 0…1").
    static func unitText(_ unit: String) -> String {
        unit.isEmpty || unit.contains("…") ? "" : " " + unit
    }

    /// A number as the user wrote it: whole numbers without ".0" (`1000`, not `1000.0`), as
    /// ``ConfigValue/jsonText`` writes numbers.
    static func plain(_ n: Double) -> String { ConfigValue.number(n).jsonText }

    static func describe(_ k: ConfigKey.Kind) -> String {
        switch k {
        case let .number(_, r, u): return "a number in \(plain(r.lowerBound))…\(plain(r.upperBound))\(unitText(u))"
        case let .integer(_, r, u): return "a whole number in \(r.lowerBound)…\(r.upperBound)\(unitText(u))"
        case .bool: return "true or false"
        case let .string(_, allowed): return allowed.map { "one of \($0.joined(separator: ", "))" } ?? "a string"
        case .strings: return "a list of strings"
        case .object: return "an object"
        case .objects: return "a list of objects"
        case .json: return "valid JSON"
        }
    }

    /// Deep merge: objects merge member by member; anything else in `top` replaces `base`.
    public static func merge(_ base: ConfigValue, _ top: ConfigValue) -> ConfigValue {
        guard case var .object(b) = base, case let .object(t) = top else { return top }
        for m in t {
            if let i = b.firstIndex(where: { $0.key == m.key }) {
                b[i] = (m.key, m.line, merge(b[i].value, m.value))
            } else {
                b.append(m)
            }
        }
        return .object(b)
    }
}

extension ConfigValue {
    /// Plain JSON text of this value (for decoding into Codable types).
    public var jsonText: String {
        switch self {
        case .null: return "null"
        case let .bool(b): return b ? "true" : "false"
        case let .number(n): return plainNumber(n)
        case let .string(s):
            let data = try? JSONEncoder().encode(s)
            return data.map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
        case let .array(a): return "[" + a.map(\.jsonText).joined(separator: ",") + "]"
        case let .object(m): return "{" + m.map { ConfigValue.string($0.key).jsonText + ":" + $0.value.jsonText }.joined(separator: ",") + "}"
        }
    }
}
