import Foundation
import Testing
@testable import InterludeConfig
import InterludePolicy

@Suite struct JSON5Tests {
    @Test func commentsUnquotedKeysTrailingCommas() throws {
        let v = try JSON5.parse("""
        // top
        { a: 1, /* inline */ 'b': 'x', "c": [true, false, null,], d: 0x10, e: -1.5e1, }
        """)
        #expect(v["a"] == .number(1))
        #expect(v["b"] == .string("x"))
        #expect(v["c"] == .array([.bool(true), .bool(false), .null]))
        #expect(v["d"] == .number(16))
        #expect(v["e"] == .number(-15))
    }
    @Test(arguments: ["{ a: NaN }", "{ a: Infinity }", "{ a: -Infinity }", "{ a: +Infinity }", "{ a: -NaN }"])
    func nonFiniteNumbersAreRefusedByName(text: String) {
        do { _ = try JSON5.parse(text); Issue.record("accepted") } catch {
            #expect(error.message.contains("not allowed here: config numbers are finite"), "\(error.message)")
        }
    }
    /// Issue 7, hole 3: a file nested 40,000 deep overflowed the parser's stack (SIGSEGV); 35,000
    /// was refused only by luck of the stack size. Any depth past the bound is a syntax error.
    @Test(arguments: [33, 40_000, 200_000])
    func deepNestingIsASyntaxErrorNotACrash(depth: Int) {
        for (open, close) in [("[", "]"), ("{a:", "}")] {
            let text = "{ x: " + String(repeating: open, count: depth) + "1" + String(repeating: close, count: depth) + " }"
            do { _ = try JSON5.parse(text); Issue.record("accepted depth \(depth)") } catch {
                #expect(error.message.contains("nested more than \(JSON5.maximumDepth) levels deep"), "\(error.message)")
                #expect(error.line == 1)
            }
        }
        let ok = "{ x: " + String(repeating: "[", count: JSON5.maximumDepth - 1) + String(repeating: "]", count: JSON5.maximumDepth - 1) + " }"
        #expect(throws: Never.self) { _ = try JSON5.parse(ok) }
    }
    @Test func keysRememberTheirLines() throws {
        let v = try JSON5.parse("{\n  a: {\n    b: 2,\n  },\n}")
        guard case let .object(top) = v, case let .object(inner) = top[0].value else { Issue.record("shape"); return }
        #expect(top[0].line == 2)
        #expect(inner[0].line == 3)
    }
    @Test(arguments: [
        ("{\n  a: 1,\n  b: ,\n}", 3), ("{\n a: 1\n b: 2 }", 3), ("{ a: 'x\n' }", 1), ("{\n\n a: yes }", 3), ("{ a: 1 } x", 1),
    ])
    func syntaxErrorsNameTheLine(text: String, line: Int) {
        do { _ = try JSON5.parse(text); Issue.record("accepted \(text)") } catch { #expect(error.line == line) }
    }

    /// A key given twice in one object is refused at the second, naming the first (JSON5 itself
    /// lets the last win: a pasted block would silently undo an earlier setting). The same key in
    /// two different objects is fine.
    @Test(arguments: [
        ("{\n  audio: { duckLevelDb: -14 },\n  audio: { duckRampDownMs: 300 },\n}", 3, 3, "duplicate key 'audio' (first given on line 2)"),
        ("{ a: { x: 1,\n   'x': 2 } }", 2, 4, "duplicate key 'x' (first given on line 1)"),
    ])
    func duplicateKeysAreRefusedWhereTheyRepeat(text: String, line: Int, column: Int, message: String) {
        do { _ = try JSON5.parse(text); Issue.record("accepted \(text)") } catch {
            #expect(error.line == line)
            #expect(error.column == column)
            #expect(error.message == message)
        }
        #expect(throws: Never.self) { _ = try JSON5.parse("{ a: { x: 1 }, b: { x: 1 }, c: [{ x: 1 }, { x: 2 }] }") }
    }

    /// A number too large for a Double (1e400 reads as infinity) is a syntax error, as a literal
    /// `Infinity` is, not an out-of-range value of infinity.
    @Test func aNumberThatOverflowsIsASyntaxError() {
        for text in ["{ a: -1e400 }", "{ a: 1e309 }"] {
            do { _ = try JSON5.parse(text); Issue.record("accepted \(text)") } catch {
                #expect(error.message.contains("too large"), "\(error.message)")
            }
        }
        #expect(throws: Never.self) { _ = try JSON5.parse("{ a: 1e308, b: -1.5e-320 }") }
    }
}

@Suite final class ConfigLoaderTests {
    /// The folders this test made (``tempDir(_:)``), removed when it ends (Swift Testing makes one
    /// instance per test): a run of the suites left a hundred of them in /tmp.
    private var made: [String] = []
    deinit { for dir in made { try? FileManager.default.removeItem(atPath: dir) } }

    let builtin = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Config").path

    func tempDir(_ text: String) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("interlude-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        made.append(dir.path)
        try text.write(to: dir.appendingPathComponent(ConfigLoader.fileName), atomically: true, encoding: .utf8)
        return dir.path
    }

    /// Issue 7, hole 14: a file that is not UTF-8 is reported at the line and column of its
    /// first bad byte (it said line 0).
    @Test(arguments: [
        ([UInt8]("{\n  audio: {\n    x: '".utf8) + [0xff] + [UInt8]("' }\n}".utf8), 3, 9),
        ([0xc3], 1, 1),
        ([UInt8]("{ a: 'caf\u{e9}' }\n// \u{1F514}\n".utf8) + [0xe2, 0x82], 3, 1),
    ])
    func notUTF8NamesLineAndColumn(bytes: [UInt8], line: Int, column: Int) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("interlude-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try Data(bytes).write(to: dir.appendingPathComponent(ConfigLoader.fileName))
        do { _ = try ConfigLoader.load(folders: [dir.path]); Issue.record("accepted") } catch {
            #expect(error.code == "configUnreadable")
            #expect(error.line == line, "\(error)")
            #expect(error.message.contains("not UTF-8 text (column \(column))"), "\(error)")
        }
    }

    /// A folder where the config file should be is about the file as a whole: the message names
    /// the path without a line (it said "…/interlude.json5:0: is a folder"), and ends with its code.
    @Test func configUnreadable_aFolderInPlaceOfTheFileIsNotReportedAtLine0() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("interlude-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent(ConfigLoader.fileName).path
        try FileManager.default.createDirectory(atPath: file, withIntermediateDirectories: true)
        do { _ = try ConfigLoader.load(folders: [dir.path]); Issue.record("accepted a folder as the config file") } catch {
            #expect(error.code == "configUnreadable")
            #expect(error.description == "\(file): is a folder, not a file [configUnreadable]", "\(error)")
        }
    }

    /// A FIFO in place of the config file is refused as one, at once: reading it would block the
    /// start until something wrote to it (it read "No such file" before, after a read failed).
    @Test func configUnreadable_aFIFOInPlaceOfTheFileIsRefusedWithoutReadingIt() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("interlude-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appendingPathComponent(ConfigLoader.fileName).path
        #expect(mkfifo(file, 0o600) == 0)
        do { _ = try ConfigLoader.load(folders: [dir.path]); Issue.record("accepted a FIFO as the config file") } catch {
            #expect(error.description == "\(file): is a FIFO, not a file [configUnreadable]", "\(error)")
        }
    }

    /// A config file that is a symbolic link to nothing, or one of a loop of links, is refused
    /// (it was skipped as missing: the daemon ran on defaults without a word, and a reload then
    /// took it for a file gone since the start).
    @Test(arguments: ["dangling", "loop"])
    func configUnreadable_aBrokenSymbolicLinkAsTheFileIsRefused(_ kind: String) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("interlude-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appendingPathComponent(ConfigLoader.fileName).path
        if kind == "dangling" {
            #expect(symlink(dir.path + "/nowhere.json5", file) == 0)
        } else {
            #expect(symlink(dir.path + "/other.json5", file) == 0)
            #expect(symlink(file, dir.path + "/other.json5") == 0)
        }
        do { _ = try ConfigLoader.load(folders: [dir.path]); Issue.record("a \(kind) link was skipped as a missing file") } catch {
            let said = kind == "dangling" ? "is a symbolic link to nothing (No such file or directory)" : "is a loop of symbolic links"
            #expect(error.description == "\(file): \(said) [configUnreadable]", "\(error)")
        }
    }

    /// A config folder named on purpose that is not there (at start, or deleted before a reload):
    /// `configNotFound` naming it and where it was given; `--config` wins over the variable.
    @Test func configNotFound_aNamedConfigFolderThatIsNotThere() throws {
        let gone = FileManager.default.temporaryDirectory.appendingPathComponent("interlude-config-gone-\(UUID().uuidString)").path
        let e = #expect(throws: ConfigError.self) { try ConfigLoader.checkNamedFolder(override: gone, environment: [:]) }
        #expect(e?.code == "configNotFound")
        #expect(e?.description == "\(gone): no such folder (given with --config) [configNotFound]")
        let v = #expect(throws: ConfigError.self) {
            try ConfigLoader.checkNamedFolder(override: nil, environment: ["INTERLUDE_CONFIG_DIR": gone])
        }
        #expect(v?.description == "\(gone): no such folder (given with INTERLUDE_CONFIG_DIR) [configNotFound]")
        #expect(throws: Never.self) { try ConfigLoader.checkNamedFolder(override: builtin, environment: ["INTERLUDE_CONFIG_DIR": gone]) }
        #expect(throws: Never.self) { try ConfigLoader.checkNamedFolder(override: nil, environment: [:]) }
        // A file in place of the folder is said to be one (it read "no such folder").
        let file = try tempDir("{}") + "/interlude.json5"
        let f = #expect(throws: ConfigError.self) { try ConfigLoader.checkNamedFolder(override: file, environment: [:]) }
        #expect(f?.description == "\(file): is not a folder (given with --config) [configNotFound]")
        // A file of the folder in force (read at start or by the last reload) and deleted since
        // (the folder kept).
        let dir = try tempDir("{}")
        #expect(throws: Never.self) { try ConfigLoader.checkNamedFolder(override: dir, environment: [:], inForce: [dir + "/interlude.json5"]) }
        try FileManager.default.removeItem(atPath: dir + "/interlude.json5")
        let g = #expect(throws: ConfigError.self) {
            try ConfigLoader.checkNamedFolder(override: dir, environment: [:], inForce: [self.builtin + "/interlude.json5", dir + "/interlude.json5"])
        }
        #expect(g?.file == dir + "/interlude.json5" && g?.code == "configNotFound" && g?.message.contains("in force and gone now") == true)
        // Replaced by a link to nothing: not "gone" (the load refuses it as a broken link).
        #expect(symlink(dir + "/nowhere.json5", dir + "/interlude.json5") == 0)
        #expect(throws: Never.self) { try ConfigLoader.checkNamedFolder(override: dir, environment: [:], inForce: [dir + "/interlude.json5"]) }
        let link = #expect(throws: ConfigError.self) { try ConfigLoader.load(folders: [dir]) }
        #expect(link?.code == "configUnreadable" && link?.message.contains("symbolic link to nothing") == true, "\(String(describing: link))")
    }

    @Test func builtinDefaultsFileMatchesTheSchema() throws {
        let c = try ConfigLoader.load(folders: [builtin])
        #expect(c.files.count == 1)
        for key in ConfigSchema.keys where !key.path.contains("*") && !key.path.contains("[]") {
            switch key.kind {
            case let .number(d, _, _): #expect(c.lookup(key.path) == .number(d), "\(key.path)")
            case let .integer(d, _, _): #expect(c.lookup(key.path) == .number(Double(d)), "\(key.path)")
            case let .bool(d): #expect(c.lookup(key.path) == .bool(d), "\(key.path)")
            case let .string(d, _): #expect(c.lookup(key.path) == (d.map { .string($0) } ?? .null), "\(key.path)")
            case let .strings(d): #expect(c.lookup(key.path) == .array(d.map { .string($0) }), "\(key.path)")
            case .object, .objects, .json: break
            }
        }
        #expect(c.audioPolicy == AudioPolicyConfig())
        #expect(c.notificationPolicy == NotificationPolicyConfig())
    }

    @Test func laterFilesOverrideKeyByKey() throws {
        let user = try tempDir("{ audio: { duckLevelDb: -20 } }")
        let c = try ConfigLoader.load(folders: [builtin, "/nonexistent", user])
        #expect(c.audioPolicy.duckLevelDb == -20)
        #expect(c.audioPolicy.duckRampDown == 0.3)
        #expect(c.files.count == 2)
    }

    @Test(arguments: [
        ("{\n  audio: {\n    duckLevelDb: 5,\n  },\n}", 3, "audio.duckLevelDb", "configBadValue"),
        ("{\n  audio: {\n    duckLevel: -5,\n  },\n}", 3, "audio.duckLevel", "configUnknownKey"),
        ("{\n  sounds: {\n    default: 3,\n  },\n}", 3, "sounds.default", "configBadValue"),
        ("{\n  audio: {\n    duckRampUpMs: 1.5,\n  },\n}", 3, "audio.duckRampUpMs", "configBadValue"),
        ("{\n  audio: 1,\n}", 2, "audio", "configBadValue"),
        ("{\n  colour: 'red',\n}", 2, "colour", "configUnknownKey"),
    ])
    func badFileNamesFileLineAndKey(text: String, line: Int, key: String, code: String) throws {
        let dir = try tempDir(text)
        do { _ = try ConfigLoader.load(folders: [builtin, dir]); Issue.record("accepted") } catch {
            #expect(error.file == dir + "/interlude.json5")
            #expect(error.line == line)
            #expect(error.key == key)
            #expect(error.code == code)
            #expect(error.description.contains("\(dir)/interlude.json5:\(line): key '\(key)'"))
        }
    }

    @Test("a notification key of the wrong kind says what it must be in the config's words, not Swift's",
          arguments: [
            ("{\n  entitledCriticalApps: 'org.example.Alarm',\n}", "entitledCriticalApps", "must be a list"),
            ("{\n  authorization: [],\n}", "authorization", "must be an object, not a list"),
            // The value given is named (a stranger's `"20"`, null and true said only what it must be).
            ("{\n  server: { logNotificationsPerSecond: '20' },\n}", "server.logNotificationsPerSecond",
             "must be a whole number in 0…1000000 lines a second, not \"20\""),
            ("{\n  server: { logNotificationsPerSecond: null },\n}", "server.logNotificationsPerSecond", ", not null"),
            ("{\n  server: { logNotificationsPerSecond: true },\n}", "server.logNotificationsPerSecond", ", not true"),
            // null only where the default is unset (the thirteenth session's stranger: `authorization.default:
            // null` was taken and acted as prompt; `sounds.default`, `bus.defaultSound` were taken too).
            ("{\n  authorization: { default: null },\n}", "authorization.default", "must be one of grant, deny, prompt, not null"),
            ("{\n  sounds: { default: null },\n}", "sounds.default", "must be a string, not null"),
            ("{\n  bus: { defaultSound: null },\n}", "bus.defaultSound", "must be a string, not null"),
            // And for a key of any JSON with a default of its own (the fourteenth session's stranger).
            ("{\n  entitledCriticalApps: null,\n}", "entitledCriticalApps", "must not be null (its default is [])"),
            // A list's item of the wrong kind too (the second stranger: `[1]` said only "a list of strings").
            ("{\n  server: { userTools: ['org.interlude.CLI', 1] },\n}", "server.userTools[1]", "must be a string (in a list of strings), not 1"),
            ("{\n  bursts: { cooldown: [{ within: 10, volume: 0 }, 7] },\n}", "bursts.cooldown[1]", "must be an object (in a list of objects), not 7"),
            // A value the decoder finds of the wrong kind is named too (the fourteenth session's stranger).
            ("{\n  entitledCriticalApps: ['a.b', { app: 'c.d', executablePath: 5 }],\n}", "entitledCriticalApps[1].executablePath",
             "must be a string, not 5"),
            // An item that is neither an app id nor an object says both (the third stranger's `["a", 5]`).
            ("{\n  entitledCriticalApps: ['a.b', 5],\n}", "entitledCriticalApps[1]", "must be an app id or an object {app, executablePath}"),
            ("{\n  entitledCriticalApps: [null],\n}", "entitledCriticalApps[0]", "must be an app id or an object {app, executablePath}"),
            ("{\n  entitledCriticalApps: [{ app: 'org.example.Alarm', executablepath: '/usr/bin/alarm' }],\n}",
             "entitledCriticalApps[0].executablepath", "unknown key"),
          ])
    func notificationKeyOfTheWrongKind(text: String, key: String, message: String) throws {
        let dir = try tempDir(text)
        do { _ = try ConfigLoader.load(folders: [builtin, dir]); Issue.record("accepted") } catch {
            #expect(error.line == 2)
            #expect(error.key == key)
            #expect(error.description.contains(message), "\(error.description)")
            #expect(!error.description.contains("Array<") && !error.description.contains("Dictionary<"), "\(error.description)")
        }
    }

    /// A key inside a list is named with its index and the line of its own key, not of the
    /// top-level key holding the list (a stranger's `end: "9am"` on line 8 was reported on line 3).
    @Test("a key inside a list names its index and its own line", arguments: [
        ("{\n  focusModes: {\n    work: {\n      allowedApps: [],\n      schedule: [\n        {\n          weekdays: ['monday'],\n          start: '09:00',\n          end: '9am',\n        },\n      ],\n    },\n  },\n}",
         9, "focusModes.work.schedule[0].end"),
        ("{\n  focusModes: {\n    work: {\n      schedule: [\n        { start: '09:00', end: '10:00',\n          weekdays: ['funday'] },\n      ],\n    },\n  },\n}",
         6, "focusModes.work.schedule[0].weekdays[0]"),
        ("{\n  entitledCriticalApps: [\n    'org.example.Alarm',\n    { app: 'org.example.Clock',\n      executablePath: 'rel/path' },\n  ],\n}",
         5, "entitledCriticalApps[1].executablePath"),
        ("{\n  bursts: {\n    cooldown: [\n      { within: 10, volume: 0 },\n      { within: 60,\n        volume: 2 },\n    ],\n  },\n}",
         6, "bursts.cooldown[1].volume"),
    ])
    func aKeyInsideAListNamesItsIndexAndLine(text: String, line: Int, key: String) throws {
        let dir = try tempDir(text)
        do { _ = try ConfigLoader.load(folders: [builtin, dir]); Issue.record("accepted") } catch {
            #expect(error.file == dir + "/interlude.json5", "\(error)")
            #expect(error.key == key, "\(error)")
            #expect(error.line == line, "\(error)")
        }
    }

    @Test func syntaxErrorNamesFileAndLine() throws {
        let dir = try tempDir("{\n  audio: {\n    duckLevelDb: ,\n  },\n}")
        do { _ = try ConfigLoader.load(folders: [dir]); Issue.record("accepted") } catch {
            #expect(error.line == 3)
            #expect(error.code == "configSyntax")
        }
    }

    @Test func scenarioNotificationConfigIsMergedOverDefaults() throws {
        let overlay = try JSON5.parse(#"{"entitledCriticalApps": ["org.example.Alarm"], "focusModes": {"sleep": {"allowedApps": [], "allowTimeSensitive": true}}, "authorization": {"default": "grant"}}"#)
        let c = try ConfigLoader.load(folders: [builtin], overlay: ("scenario.json", overlay))
        #expect(c.notificationPolicy.authorization.default == .grant)
        #expect(c.notificationPolicy.entitledCriticalApps.map(\.app) == ["org.example.Alarm"])
        #expect(c.notificationPolicy.focusModes.keys.sorted() == ["doNotDisturb", "sleep", "work"])
    }

    @Test(arguments: [
        ("{\n  timeZone: 'Mars/Olympus',\n}", 2, "timeZone"),
        ("{\n  summaryTimes: ['25:99'],\n}", 2, "summaryTimes"),
        ("{\n  summaryTimes: [],\n}", 2, "summaryTimes"),  // N9: held for ever (a stranger's find)
        ("{\n  authorization: { default: 'maybe' },\n}", 2, "authorization.default"),
        // N3: a relative executablePath never matches /proc/PID/exe (a stranger's find).
        ("{\n  entitledCriticalApps: [{ app: 'org.example.Alarm', executablePath: 'bin/alarm' }],\n}", 2, "entitledCriticalApps"),
    ])
    func badNotificationValuesNameFileLineAndKey(text: String, line: Int, key: String) throws {
        let dir = try tempDir(text)
        do { _ = try ConfigLoader.load(folders: [builtin, dir]); Issue.record("accepted") } catch {
            #expect(error.file == dir + "/interlude.json5")
            #expect(error.line == line)
            #expect(error.key?.hasPrefix(key) == true, "\(error)")
            // The key is said once (the time-zone error used to repeat it: "key 'timeZone': timeZone: …").
            #expect(!error.message.hasPrefix(key + ":"), "\(error)")
        }
    }

    /// Limits set against each other are accepted and said (a stranger's find: the lower one bound
    /// without a word): each pair where the per-app or per-client limit is above its total.
    @Test(arguments: [
        ("{}", [String]()),
        ("{ maxPendingPerApp: 1000 }", []),  // equal is not above
        ("{\n  maxPendingPerApp: 2000,\n}", ["maxPendingPerApp 2000 (DIR/interlude.json5:2) is above maxPendingTotal 1000 (the default)"]),
        ("{ maxPendingTotal: 10 }", ["maxPendingPerApp 64 (the default) is above maxPendingTotal 10 (DIR/interlude.json5:1)"]),
        ("{ bursts: { maxDeliveredTotal: 20 }, server: { maxSessions: 5 } }",
         ["bursts.maxDeliveredPerApp 50 (the default) is above bursts.maxDeliveredTotal 20 (DIR/interlude.json5:1)",
          "server.maxSessionsPerClient 1024 (the default) is above server.maxSessions 5 (DIR/interlude.json5:1)"]),
        // A stranger's find: the per-process connection limit above the total was not said.
        ("{ server: { maxClients: 10 } }", ["server.maxClientsPerProcess 128 (the default) is above server.maxClients 10 (DIR/interlude.json5:1)"]),
    ])
    func limitsSetAgainstEachOtherAreSaid(text: String, want: [String]) throws {
        let dir = try tempDir(text)
        let c = try ConfigLoader.load(folders: [dir])
        let got = c.contradictions
        #expect(got.count == want.count, "\(got)")
        for (g, w) in zip(got, want) {
            #expect(g.hasPrefix(w.replacingOccurrences(of: "DIR", with: dir)) && g.contains("the total binds"), "\(g)")
        }
    }

    /// `maxApps` at or under what connected apps and apps with notifications can hold without the
    /// user (`server.maxClients` + `bursts.maxDeliveredTotal` + `maxPendingTotal`) is said: new
    /// apps could then be refused (a stranger's question: 180 D-Bus apps with notifications
    /// filled `maxApps: 200`, and the next names were refused without a word in the log).
    @Test func maxAppsUnderWhatAppsCanHoldIsSaid() throws {
        #expect(try ConfigLoader.load(folders: [try tempDir("{ maxApps: 2257 }")]).contradictions.isEmpty)
        let dir = try tempDir("{\n  maxApps: 200,\n}")
        let got = try ConfigLoader.load(folders: [dir]).contradictions
        #expect(got == ["maxApps 200 (\(dir)/interlude.json5:2) is not above server.maxClients + bursts.maxDeliveredTotal + maxPendingTotal "
                        + "(2256): connected apps and apps with notifications could hold every record, and new apps be refused (limitReached)"], "\(got)")
    }

    /// A reload that lowers `server.maxClients` (restart-only) under the per-process limit: the
    /// warning says the total binds after a restart and what is in force until then (it said
    /// "in effect it is at most 10" while 256 connections were still served).
    @Test func aReloadSaysWhenARestartOnlyLimitIsNotInForceYet() throws {
        let started = try ConfigLoader.load(folders: [try tempDir("{ }")])
        let dir = try tempDir("{ server: { maxClients: 10 } }")
        let reloaded = try ConfigLoader.load(folders: [dir])
        let got = reloaded.contradictions(runningSince: started)
        #expect(got == ["server.maxClientsPerProcess 128 (the default) is above server.maxClients 10 (\(dir)/interlude.json5:1): "
                        + "after a restart the total binds, so it will be at most 10; until then server.maxClients stays 256"], "\(got)")
        // Started with the same value: as at start.
        #expect(reloaded.contradictions(runningSince: reloaded) == reloaded.contradictions)
        #expect(reloaded.contradictions.first?.hasSuffix("the total binds, so in effect it is at most 10") == true)
        // A key that a reload does change (maxPendingTotal): as at start.
        let pending = try ConfigLoader.load(folders: [try tempDir("{ maxPendingTotal: 10 }")])
        #expect(pending.contradictions(runningSince: started) == pending.contradictions)
    }

    /// Two files setting different keys of one section: each key's place is the file that set
    /// it (it was the section's last file, so a built-in value was reported at a line of the
    /// user's file).
    @Test func aKeyIsPlacedInTheFileThatSetItNotTheLastFileOfItsSection() throws {
        let dir = try tempDir("{\n  server: { maxSessions: 5 },\n}")
        let c = try ConfigLoader.load(folders: [builtin, dir])
        #expect(c.place(of: "server.maxSessions") == (dir + "/interlude.json5", 2))
        let perClient = c.place(of: "server.maxSessionsPerClient")
        #expect(perClient.file == builtin + "/interlude.json5" && perClient.line > 1, "\(perClient)")
        #expect(c.contradictions.first?.contains("(\(builtin)/interlude.json5:\(perClient.line)) is above server.maxSessions 5 (\(dir)/interlude.json5:2)") == true,
                "\(c.contradictions)")
        let alone = try ConfigLoader.load(folders: [dir])
        #expect(alone.place(of: "server.maxSessionsPerClient") == ("the built-in defaults", 1))
    }

    /// A stranger's finds: `bus.inhibitFocus` naming no focus mode was accepted and every desktop
    /// app's Inhibit then failed as if the app were wrong; `server.userTools: []` was accepted
    /// without a word and locked the CLI out of the next reload.
    @Test func anInhibitFocusThatIsNoFocusModeIsRefusedAndACLIOutOfUserToolsIsSaid() throws {
        let bad = try tempDir("{\n  bus: { inhibitFocus: 'nope' },\n}")
        do { _ = try ConfigLoader.load(folders: [builtin, bad]); Issue.record("accepted") } catch {
            #expect(error.key == "bus.inhibitFocus" && error.code == "configBadValue" && error.line == 2
                    && error.message.contains("unknown focus \"nope\"") && error.message.contains("doNotDisturb"), "\(error)")
        }
        let custom = try tempDir("{ focusModes: { reading: {} }, bus: { inhibitFocus: 'reading' } }")
        #expect(throws: Never.self) { try ConfigLoader.load(folders: [builtin, custom]) }
        let locked = try tempDir("{\n  server: { userTools: [] },\n}")
        let c = try ConfigLoader.load(folders: [builtin, locked])
        #expect(c.contradictions.contains { $0.contains("does not name org.interlude.CLI") && $0.contains(locked + "/interlude.json5:2") },
                "\(c.contradictions)")
        #expect(try ConfigLoader.load(folders: [builtin]).contradictions.isEmpty)
    }

    /// N7: a focus mode named "", only spaces, or with a control character or line separator was
    /// taken (strangers' finds): no name a user can type or a log line can hold. Refused with the
    /// file and the line of the name.
    @Test("a focus mode's name must be a name", arguments: [
        ("{\n  focusModes: {\n    '': {},\n  },\n}", "a focus mode's name must not be empty or only spaces"),
        ("{\n  focusModes: {\n    '  ': {},\n  },\n}", "a focus mode's name must not be empty or only spaces"),
        ("{\n  focusModes: {\n    'a\\nb': {},\n  },\n}", "a focus mode's name holds U+000A (a control character or line separator); a name is one line of text"),
        ("{\n  focusModes: {\n    'a\\u0085b': {},\n  },\n}", "a focus mode's name holds U+0085 (a control character or line separator); a name is one line of text"),
        ("{\n  focusModes: {\n    'a\\u2028b': {},\n  },\n}", "a focus mode's name holds U+2028 (a control character or line separator); a name is one line of text"),
    ])
    func N7_aFocusModeNameMustBeAName(text: String, says: String) throws {
        let dir = try tempDir(text)
        do { _ = try ConfigLoader.load(folders: [builtin, dir]); Issue.record("accepted \(text)") } catch {
            #expect(error.message == says && error.key == "focusModes" && error.file == dir + "/interlude.json5" && error.line == 3
                    && error.code == "configBadValue", "\(error)")
        }
        #expect(throws: Never.self) { try ConfigLoader.load(folders: [builtin, try tempDir("{ focusModes: { 'reading time': {}, 'Lesezeit 📖': {} } }")]) }
    }

    /// Numbers in config errors read as written: `1000`, not `1000.0` (a stranger's find).
    @Test func numbersInConfigErrorsReadAsWritten() throws {
        for (text, says) in [("{ bursts: { audibleAlertInterval: 5000 } }", "5000 is out of range 0…3600 s"),
                             ("{ bursts: { maxDeliveredPerApp: 1000000 } }", "not 1000000"),
                             ("{ bursts: { maxDeliveredPerApp: 2.5 } }", "not 2.5"),
                             ("{ bursts: { audibleAlertInterval: 'often' } }", "a number in 0…3600 s"),
                             // The unit is the range itself: said once (it read "out of range 0…1 0…1").
                             ("{ defaultCriticalVolume: 3 }", "3 is out of range 0…1 [configBadValue]")] {
            let dir = try tempDir(text)
            do { _ = try ConfigLoader.load(folders: [builtin, dir]); Issue.record("accepted \(text)") } catch {
                #expect(error.description.contains(says) && !error.description.contains(".0"), "\(error)")
            }
        }
    }

    /// What a reload leaves at its starting value (PROTOCOL.md `config.reload`): the server's
    /// connection limits, the bus service's two settings and the broker section; not the session
    /// or pending limits, which follow a reload.
    @Test func restartOnlyKeysAreTheServerLimitsTheBusServiceAndTheBroker() {
        #expect(ConfigSchema.restartOnly == ["server.maxClients", "server.maxClientsPerProcess", "server.maxOutputBytes", "bus.defaultSound", "bus.maxNotificationBytes",
                                             "remote.broker", "remote.fallbackBrokers", "remote.deviceId", "remote.username", "remote.passwordFile", "remote.caFile",
                                             "remote.topicPrefix", "remote.maxMessageBytes", "remote.dedupeWindow", "remote.keepaliveSeconds"])
    }

    @Test func xdgOrder() {
        let f = ConfigLoader.folders(builtin: "/b", override: nil,
                                     environment: ["HOME": "/h", "XDG_CONFIG_DIRS": "/x1:/x2"])
        #expect(f == ["/b", "/x2/interlude", "/x1/interlude", "/h/.config/interlude"])
        let g = ConfigLoader.folders(builtin: "/b", override: "/o",
                                     environment: ["HOME": "/h", "XDG_CONFIG_HOME": "/c", "INTERLUDE_CONFIG_DIR": "/e"])
        #expect(g == ["/b", "/etc/xdg/interlude", "/c/interlude", "/o"])
        let e = ConfigLoader.folders(builtin: nil, override: nil, environment: ["HOME": "/h", "INTERLUDE_CONFIG_DIR": "/e"])
        #expect(e.last == "/e")
    }

    @Test func overlayIsValidatedAndApplied() throws {
        let overlay = try JSON5.parse(#"{"audio": {"duckLevelDb": -10}}"#)
        let c = try ConfigLoader.load(folders: [builtin], overlay: ("scenario.json", overlay))
        #expect(c.audioPolicy.duckLevelDb == -10)
        let bad = try JSON5.parse(#"{"audio": {"nope": 1}}"#)
        #expect(throws: ConfigError.self) { try ConfigLoader.load(folders: [builtin], overlay: ("scenario.json", bad)) }
    }
}
