import Foundation
import InterludeClient
import InterludeCommandLine
import InterludePolicy
import InterludeWire

/// `interlude notify | explain | focus | center | badge | auth | settings`: the notification side
/// of the CLI (POLICY.md part N). `notify` acts as the app it names; the others act as the user.
enum NotificationCommands {
    static let user = "org.interlude.CLI"

    static func connectUser(_ socket: String?) async throws -> InterludeClient {
        try await InterludeClient.connect(socket: socket, app: user)
    }

    // MARK: notify

    static func notify(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: ["alert-once", "call", "json", "promotional"], options: ["app", "title", "subtitle", "body", "level", "sound", "critical-volume", "thread", "id", "sender", "in", "at", "repeats", "badge", "category", "relevance"])
        // A stray word is a mistake (a quoted title split in two), not something to drop.
        if let extra = a.positionals.first {
            throw Arguments.UsageError(description: "notify takes no argument \(CommandOutput.text(extra)) (the text goes in --title, --subtitle, --body)")
        }
        guard let app = a.value("app") else { throw Arguments.UsageError(description: "notify needs --app ID") }
        if let why = AppIdentifier.problem(app) { throw Arguments.UsageError(description: "--app: \(why)") }
        if a.value("id")?.isEmpty == true { throw Arguments.UsageError(description: "--id must not be empty") }
        guard let title = a.value("title") else { throw Arguments.UsageError(description: "notify needs --title T") }
        var level: InterruptionLevel?
        if let l = a.value("level") {
            guard let v = ["passive": InterruptionLevel.passive, "active": .active, "timeSensitive": .timeSensitive,
                           "time-sensitive": .timeSensitive, "critical": .critical][l] else {
                throw Arguments.UsageError(description: "--level must be passive, active, timeSensitive or critical")
            }
            level = v
        }
        if a.has("in") && a.has("at") { throw Arguments.UsageError(description: "give --in or --at, not both") }
        var trigger: TriggerParams?
        var repeats: Bool?
        if let r = a.value("repeats") {
            guard let v = ["true": true, "yes": true, "false": false, "no": false][r] else {
                throw Arguments.UsageError(description: "--repeats takes true or false (or yes or no)")
            }
            guard a.has("in") else { throw Arguments.UsageError(description: "--repeats goes with --in SECONDS (an --at time fires once)") }
            repeats = v
        }
        if let s = try a.double("in", in: 0.001...NotificationPolicy.maximumScheduleSeconds) {
            trigger = TriggerParams(in: s, repeats: repeats)
        } else if let at = a.value("at") {
            trigger = TriggerParams(at: try parseTime(at, option: "--at"))
        }
        let badge = try a.value("badge").map { s -> Int in
            guard let n = Int(s), (0...NotificationPolicy.maximumBadge).contains(n) else { throw Arguments.UsageError(description: "--badge must be a whole number 0…\(NotificationPolicy.maximumBadge), not \(CommandOutput.text(s))") }
            return n
        }
        let params = AddNotificationParams(
            identifier: a.value("id"), title: title, subtitle: a.value("subtitle"), body: a.value("body"),
            // Without --sound no sound is asked for, exactly as over the protocol (PROTOCOL.md
            // notification.add: absent = silent, as iOS's content.sound = nil).
            sound: a.value("sound").map { $0.contains("/") ? URL(fileURLWithPath: $0).standardizedFileURL.path : $0 }, criticalVolume: try a.double("critical-volume", in: 0...1), badge: badge,
            thread: a.value("thread"), category: a.value("category"), level: level, relevance: try a.double("relevance", in: 0...1),
            promotional: a.has("promotional") ? true : nil, alertOnce: a.has("alert-once") ? true : nil,
            sender: a.value("sender"), isCall: a.has("call") ? true : nil, trigger: trigger)
        let c = try await InterludeClient.connect(socket: socket, app: app)
        var options: [NotificationAuthorizationOption] = [.alert, .sound, .badge]
        if level == .critical { options.append(.criticalAlert) }
        let auth = try await c.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: options),
                                    as: AuthorizationResult.self)
        if auth.status == .notDetermined || auth.status == .denied {
            CommandOutput.write(Data((CommandOutput.text("interlude: \(app) is \(auth.status.rawValue == "denied" ? "denied" : "not yet authorized") (N1); allow it with `interlude auth \(app) grant`") + "\n").utf8), to: STDERR_FILENO)
        }
        let r = try await c.call(NotificationMethod.add, params, as: AddNotificationResult.self)
        if a.has("json") { CommandOutput.printJSONLine(r) } else { print("\(CommandOutput.text(r.identifier)): \(CommandOutput.describe(r.decision))") }
        if trigger == nil, r.decision.sound.map({ $0.volume > 0 }) == true { await reportSound(of: r.identifier, on: c) }
        return 0
    }

    /// Waits (at most 3 s) for the daemon's `soundPlayed` for a notification delivered now, and
    /// prints its S1 warning when the requested sound could not be used and another played.
    static func reportSound(of identifier: String, on c: InterludeClient) async {
        let event = await withTaskGroup(of: WireEvent?.self) { g in
            g.addTask {
                for await e in c.events where e.event == WireEventName.soundPlayed && e.data["notification"]?.stringValue == identifier {
                    return e
                }
                return nil
            }
            g.addTask { try? await Task.sleep(nanoseconds: 3_000_000_000); return nil }
            let first = await g.next() ?? nil
            g.cancelAll()
            return first
        }
        guard let e = event, let w = e.data["warning"], w != .null else { return }
        let message = w["message"]?.stringValue ?? "\(w)"
        let played = e.data["played"]?.stringValue ?? "?"
        CommandOutput.warn("warning: \(message) — played \(played) instead")
    }

    /// "12:30" (today, or tomorrow if past), an ISO 8601 date-time (with a zone, or local time
    /// without one), or seconds since the epoch; within the next 10 years.
    static func parseTime(_ s: String, option: String) throws -> Double {
        let now = Date().timeIntervalSince1970
        func checked(_ t: Double) throws -> Double {
            guard t.isFinite, t <= now + 10 * 366 * 86400 else {
                throw Arguments.UsageError(description: "\(option) \(CommandOutput.text(s)) is not a time within the next 10 years")
            }
            return t
        }
        func matches(_ pattern: String) -> Bool { (try? Regex(pattern).wholeMatch(in: s)) != nil }
        // Each form is checked whole first: the parsers below take a valid prefix and ignore what
        // follows (2030-01-01T09:00:00Zjunk, 09:00:junk).
        if matches(#"[0-9]+(\.[0-9]+)?"#), let epoch = Double(s) { return try checked(epoch) }
        if matches(#"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?"#) {
            // With a zone, whole or fractional seconds (2026-12-01T09:00:00.25Z).
            let iso = ISO8601DateFormatter(), isoFractional = ISO8601DateFormatter()
            isoFractional.formatOptions.insert(.withFractionalSeconds)
            if let d = iso.date(from: s) ?? isoFractional.date(from: s) { return try checked(d.timeIntervalSince1970) }
            for format in ["yyyy-MM-dd'T'HH:mm:ss.SSS", "yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd HH:mm"] {
                let f = DateFormatter()
                f.locale = Locale(identifier: "en_US_POSIX")
                f.timeZone = TimeZone.current
                f.dateFormat = format
                if let d = f.date(from: s) { return try checked(d.timeIntervalSince1970) }
            }
        }
        if matches(#"[0-9]{1,2}:[0-9]{2}"#) {
            let parts = s.split(separator: ":").compactMap { Int($0) }
            if parts.count == 2, (0...23).contains(parts[0]), (0...59).contains(parts[1]) {
                var cal = Calendar.current
                cal.timeZone = TimeZone.current
                let now = Date()
                var when = cal.date(bySettingHour: parts[0], minute: parts[1], second: 0, of: now)!
                if when <= now { when = cal.date(byAdding: .day, value: 1, to: when)! }
                return when.timeIntervalSince1970
            }
        }
        throw Arguments.UsageError(description: "\(option) takes HH:MM (today or tomorrow), a date-time (2026-12-01T09:00 or 2026-12-01T09:00:00.25, local; with a zone: 2026-12-01T09:00:00Z or …+01:00) or epoch seconds (1796115600.5)")
    }

    // MARK: explain, focus

    static func explain(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: ["json"], options: ["app"])
        guard a.positionals.count == 1 else { throw Arguments.UsageError(description: "explain takes one notification ID") }
        let c = try await connectUser(socket)
        let r = try await c.call(NotificationMethod.explain, ExplainParams(app: a.value("app"), identifier: a.positionals[0]), as: ExplainResult.self)
        if a.has("json") { CommandOutput.printJSONLine(r); return 0 }
        print("\(CommandOutput.text(r.app))/\(CommandOutput.text(r.identifier)): \(CommandOutput.describe(r.decision))")
        // S1: what the sound the decision named actually played, when it was not that sound.
        if let s = r.sound, s.played != s.requested || s.warning != nil {
            print(CommandOutput.text("sound: \(s.requested) was requested, \(s.played) played" + (s.warning.map { " (\($0.code.rawValue): \($0.message)) [S1]" } ?? " [S1]")))
        }
        // N16: the decisions before the latest (replaced entries, holds, refusals), oldest first.
        let earlier = (r.history ?? []).dropLast()
        if !earlier.isEmpty {
            print("earlier decisions:")
            for h in earlier { print("  \(Date(timeIntervalSince1970: h.time.secondsSince1970))  \(CommandOutput.describe(h.decision))") }
        }
        return 0
    }

    /// `interlude focus on NAME [--for S | --until TIME] | off | status [--json]` (N7): sets,
    /// ends or shows the manual focus; `off` first prints the daemon's `missedDuringFocus`.
    /// `--json` prints the `focus.status` result (and the event) as JSON lines.
    static func focus(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: ["json"], options: ["for", "until"])
        let usage = Arguments.UsageError(description: "focus on NAME [--for S | --until TIME] | off | status [--json]")
        switch a.positionals.first {  // the command line is checked before the daemon is asked
        case "on": guard a.positionals.count == 2 else { throw usage }
        case "off", "status", nil:
            guard a.positionals.count <= 1, !a.has("for"), !a.has("until") else { throw usage }
        default: throw usage
        }
        let c = try await connectUser(socket)
        let status: FocusStatusResult
        switch a.positionals.first {
        case "on":
            guard a.positionals.count == 2 else { throw Arguments.UsageError(description: "focus on NAME [--for SECONDS | --until TIME]") }
            if a.has("for") && a.has("until") { throw Arguments.UsageError(description: "give --for or --until, not both") }
            status = try await c.call(NotificationMethod.focusSet,
                                      FocusSetParams(name: a.positionals[1], until: try a.value("until").map { try parseTime($0, option: "--until") },
                                                     for: try a.double("for", in: 1...NotificationPolicy.maximumScheduleSeconds)), as: FocusStatusResult.self)
        case "off":
            // N7: the daemon sends one missedDuringFocus event when a focus ends; subscribe first
            // so the user sees what the focus silenced.
            try await c.subscribe()
            status = try await c.call(NotificationMethod.focusSet, FocusSetParams(name: nil), as: FocusStatusResult.self)
            if let missed = await missedDuringFocus(on: c) {
                if a.has("json") { CommandOutput.printJSONLine(missed) } else { print(describeMissed(missed)) }
            }
        case "status", nil:
            status = try await c.call(NotificationMethod.focusStatus, StatusParams(), as: FocusStatusResult.self)
        default:
            throw Arguments.UsageError(description: "focus on NAME [--for S | --until TIME] | off | status")
        }
        if a.has("json") { CommandOutput.printJSONLine(status); return 0 }
        // A mode's name is the user's config text: printed escaped as an app's text is.
        var line = "focus: \(CommandOutput.text(status.focus ?? "off"))"
        if let f = status.focus { line += status.manual ? " (manual" + (status.until.map { ", until \(Date(timeIntervalSince1970: $0))" } ?? "") + ")" : " (schedule)"; _ = f }
        print(line)
        print("modes: \(status.modes.map(CommandOutput.text).joined(separator: ", "))")
        return 0
    }

    /// The daemon's `missedDuringFocus` event after `focus off` (N7); nil when no focus was on
    /// (no event within 1 s).
    static func missedDuringFocus(on c: InterludeClient) async -> WireEvent? {
        let event = await withTaskGroup(of: WireEvent?.self) { g in
            g.addTask {
                for await e in c.events where e.event == NotificationEventName.missedDuringFocus { return e }
                return nil
            }
            g.addTask { try? await Task.sleep(nanoseconds: 1_000_000_000); return nil }
            let first = await g.next() ?? nil
            g.cancelAll()
            return first
        }
        return event
    }

    /// A `missedDuringFocus` event in words: "missed during sleep: 2 notifications
    /// (org.example.Chat: 2)" and one line per notification, an app's text escaped.
    static func describeMissed(_ e: WireEvent) -> String {
        let focus = e.data["focus"]?.stringValue ?? "focus"
        let missed = (try? e.data["missed"]?.decode([NotificationMissedEntry].self)) ?? []
        guard !missed.isEmpty else { return CommandOutput.text("missed during \(focus): nothing") }
        let byApp = Dictionary(grouping: missed, by: \.app).map { "\($0.key): \($0.value.count)" }.sorted()
        var lines = [CommandOutput.text("missed during \(focus): \(missed.count) notification\(missed.count == 1 ? "" : "s") (\(byApp.joined(separator: ", ")))")]
        for m in missed {
            lines.append(CommandOutput.text("  \(Date(timeIntervalSince1970: m.time.secondsSince1970))  \(m.app)  \(m.identifier)  \(m.title)"))
        }
        return lines.joined(separator: "\n")
    }

    // MARK: categories

    /// `interlude categories --app ID CATEGORY [--action ID:TITLE[:OPTION,…]]… [--text-input ACTION:PLACEHOLDER]…
    /// [--placeholder BODY]`: registers one notification category of app ID with its actions
    /// (N14: at most 4; options destructive, authenticationRequired, foreground), connecting as
    /// that app. The app's other categories stay as they are.
    static func categories(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: [], options: ["app", "action", "text-input", "placeholder"], repeatable: ["action", "text-input"])
        let usage = Arguments.UsageError(description: "categories --app ID CATEGORY [--action ID:TITLE[:OPTION,...]]... [--text-input ACTION:PLACEHOLDER]... [--placeholder BODY]")
        guard let app = a.value("app"), a.positionals.count == 1 else { throw usage }
        var inputs: [String: String] = [:]
        for t in a.values["text-input"] ?? [] {
            let parts = t.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw Arguments.UsageError(description: "--text-input takes ACTION:PLACEHOLDER, not \(CommandOutput.text(t))") }
            inputs[parts[0]] = parts[1]
        }
        var actions: [NotificationAction] = []
        for spec in a.values["action"] ?? [] {
            let parts = spec.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard parts.count >= 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw Arguments.UsageError(description: "--action takes ID:TITLE[:OPTION,...], not \(CommandOutput.text(spec))")
            }
            let options = try (parts.count == 3 ? parts[2].split(separator: ",").map(String.init) : []).map { o -> NotificationActionOption in
                guard let v = NotificationActionOption(rawValue: o) else {
                    throw Arguments.UsageError(description: "unknown action option \(CommandOutput.text(o)) (destructive, authenticationRequired, foreground)")
                }
                return v
            }
            actions.append(NotificationAction(identifier: parts[0], title: parts[1], options: options, textInputPlaceholder: inputs.removeValue(forKey: parts[0])))
        }
        if let stray = inputs.keys.sorted().first { throw Arguments.UsageError(description: "--text-input names \(CommandOutput.text(stray)), which no --action defines") }
        let c = try await InterludeClient.connect(socket: socket, app: app)
        _ = try await c.call(NotificationMethod.registerCategories,
                             RegisterCategoriesParams(categories: [NotificationCategory(identifier: a.positionals[0], actions: actions,
                                                                                        hiddenPreviewsBodyPlaceholder: a.value("placeholder"))]),
                             as: JSONValue.self)
        print(CommandOutput.text("\(app): category \(a.positionals[0]) with \(actions.count) action\(actions.count == 1 ? "" : "s")"
              + (actions.isEmpty ? "" : " (\(actions.map(\.identifier).joined(separator: ", ")))")))
        return 0
    }

    // MARK: center, badge

    static func center(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: ["json"], options: ["app", "text"])
        let app = a.value("app")
        let usage = Arguments.UsageError(description: "center [--app ID] [remove ID | clear | respond ID ACTION [--text T]]")
        switch a.positionals.first {  // the command line is checked before the daemon is asked
        case "respond":  // --app only when several apps have that identifier
            guard a.positionals.count == 3 else { throw usage }
        case "remove", "clear":
            guard app != nil else { throw Arguments.UsageError(description: "center \(CommandOutput.text(a.positionals[0])) needs --app ID (whose notifications)") }
            guard a.positionals.count == (a.positionals[0] == "remove" ? 2 : 1), !a.has("text") else { throw usage }
        case nil: break
        default: throw usage
        }
        let c = try await connectUser(socket)
        switch a.positionals.first {
        case "respond":
            // N14: the user's response reaches the app (a bus app as ActionInvoked), queued if offline.
            let id = a.positionals[1], action = a.positionals[2]
            var owner = app
            if owner == nil {
                let all = try await c.wholeCenter(all: true)  // page by page: it may be past the first
                let apps = Set(all.notifications.filter { $0.identifier == id }.map(\.app))
                guard apps.count == 1 else {
                    return CommandOutput.fail(CommandOutput.text(apps.isEmpty ? "no notification \(id) in the center" : "several apps have a notification \(id): name one with --app"))
                }
                owner = apps.first
            }
            _ = try await c.call(NotificationMethod.respond, RespondParams(app: owner!, notification: id, action: action, text: a.value("text")),
                                 as: JSONValue.self)
            print(CommandOutput.text("responded \(action) to \(owner!)/\(id)"))
            return 0
        case "remove":
            guard a.positionals.count == 2, let app else { throw Arguments.UsageError(description: "center --app ID remove NOTIFICATION") }
            let id = a.positionals[1]
            let r = try await c.call(NotificationMethod.remove, RemoveNotificationsParams(app: app, pending: [id], delivered: [id]),
                                     as: RemoveNotificationsResult.self)
            guard r.removed.contains(id) else { return CommandOutput.fail(CommandOutput.text("\(app) has no notification \(id) (see `interlude center --app \(app)`)")) }
            print("removed \(CommandOutput.text(id))")
            return 0
        case "clear":
            guard let app else { throw Arguments.UsageError(description: "center --app ID clear") }
            let r = try await c.call(NotificationMethod.remove, RemoveNotificationsParams(app: app, all: true), as: RemoveNotificationsResult.self)
            let after = try await c.call(NotificationMethod.delivered, ListNotificationsParams(app: app), as: NotificationListResult.self)
            // N12: a cleared center sets the badge to 0 (unless the app's badges are off).
            print("cleared \(CommandOutput.text(app)): \(r.removed.count) removed, badge \(after.badges[app] ?? 0)")
            return 0
        case nil: break
        default: throw usage
        }
        let list = try await c.wholeCenter(app: app, all: app == nil)
        if a.has("json") { CommandOutput.printJSONLine(list); return 0 }
        let badges = list.badges.sorted(by: { $0.key < $1.key }).filter { $0.value != 0 }
        if list.notifications.isEmpty && list.pending.isEmpty {
            // A badge stays when the center is empty (the app set it, N12): not "empty" above it.
            print(badges.isEmpty ? "the notification center is empty" : "no notification in the center; badges as the apps set them:")
        }
        for (who, n) in badges { print("badge  \(CommandOutput.text(who))  \(n)") }
        for n in list.notifications {
            let when = Date(timeIntervalSince1970: n.deliveredAt.secondsSince1970)
            print(CommandOutput.text("\(when)  \(n.app)  \(n.identifier)  [\(CommandOutput.name(n.level))]\(n.late ? " (late)" : "")  \(n.title)\(n.body.isEmpty ? "" : " — \(n.body)")"))
        }
        for p in list.pending {
            print(CommandOutput.text("pending  \(p.app)  \(p.identifier)  at \(Date(timeIntervalSince1970: p.fireAt))\(p.repeats ? " (repeats)" : "")  \(p.title)"))
        }
        return 0
    }

    static func badge(socket: String?, _ argv: [String]) async throws -> Int32 {
        guard (1...2).contains(argv.count), !argv[0].hasPrefix("--") else { throw Arguments.UsageError(description: "badge APP [N]") }
        let count = try argv.dropFirst().first.map { s -> Int in
            guard let n = Int(s), (0...NotificationPolicy.maximumBadge).contains(n) else { throw Arguments.UsageError(description: "the badge is a whole number 0…\(NotificationPolicy.maximumBadge), not \(CommandOutput.text(s))") }
            return n
        }
        let c = try await connectUser(socket)
        if let count {
            _ = try await c.call(NotificationMethod.setBadge, SetBadgeParams(app: argv[0], count: count), as: JSONValue.self)
        }
        let list = try await c.call(NotificationMethod.delivered, ListNotificationsParams(app: argv[0], limit: 1), as: NotificationListResult.self)
        let badge = list.badges[argv[0]] ?? 0
        print("\(CommandOutput.text(argv[0])): badge \(badge), \(list.deliveredCount) in the center")
        if argv.count == 2, badge != Int(argv[1]) {
            // Accepted, but the app's badges are off (its badge setting or the badge option, N12).
            CommandOutput.write(Data("interlude: \(CommandOutput.text(argv[0]))'s badges are off: the badge stays \(badge)\n".utf8), to: STDERR_FILENO)
        }
        return 0
    }

    // MARK: auth, settings

    static func auth(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: [], options: ["critical-alerts", "time-sensitive", "sound", "marketing"])
        guard a.positionals.count == 2, let status = ["grant": NotificationAuthorizationStatus.authorized, "deny": .denied,
                                                      "provisional": .provisional][a.positionals[1]] else {
            throw Arguments.UsageError(description: "auth APP grant|deny|provisional [--critical-alerts on|off] [--time-sensitive on|off] [--sound on|off] [--marketing on|off]")
        }
        var p = SettingsParams(app: a.positionals[0])
        p.authorization = status
        p.criticalAlerts = try onOff(a, "critical-alerts")
        p.timeSensitive = try onOff(a, "time-sensitive")
        p.sound = try onOff(a, "sound")
        p.marketing = try onOff(a, "marketing")
        let c = try await connectUser(socket)
        let s = try await c.call(NotificationMethod.setSettings, p, as: NotificationAppSettings.self)
        printSettings(a.positionals[0], s)
        return 0
    }

    static func onOff(_ a: Arguments, _ name: String) throws -> Bool? {
        guard let v = a.value(name) else { return nil }
        switch v { case "on", "true", "yes": return true; case "off", "false", "no": return false
        default: throw Arguments.UsageError(description: "--\(name) takes on or off (or true/false, yes/no)") }
    }

    /// `interlude settings APP [KEY=VALUE…] [--json]` (N2): shows an app's settings, or changes
    /// the keys given and shows the result; `--json` prints them as one JSON line.
    static func settings(socket: String?, _ argv: [String]) async throws -> Int32 {
        let json = argv.contains("--json")
        let argv = argv.filter { $0 != "--json" }
        // An option-looking word is not an app (`settings --nope` showed, and `settings -x
        // sound=off` changed, the settings of an app named "--nope" or "-x"; a stranger's find).
        if let option = argv.first(where: { $0.hasPrefix("-") }) {
            throw Arguments.UsageError(description: "unknown option \(CommandOutput.text(option)) (known: --json)")
        }
        guard let app = argv.first else { throw Arguments.UsageError(description: "settings APP [KEY=VALUE…] [--json]") }
        if let why = AppIdentifier.problem(app) { throw Arguments.UsageError(description: "APP: \(why)") }
        var p = SettingsParams(app: app)
        var changed = false
        var given: Set<String> = []
        for kv in argv.dropFirst() {
            let parts = kv.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw Arguments.UsageError(description: "settings takes KEY=VALUE, not \(CommandOutput.text(kv))") }
            let (k, v) = (parts[0], parts[1])
            // As an option given twice: which one was meant is not ours to guess.
            guard given.insert(k).inserted else { throw Arguments.UsageError(description: "\(CommandOutput.text(k)) is given twice; it takes one value") }
            func bool() throws -> Bool {
                switch v { case "on", "true", "yes": return true; case "off", "false", "no": return false
                default: throw Arguments.UsageError(description: "\(CommandOutput.text(k)) takes on or off (or true/false, yes/no)") }
            }
            switch k {
            case "authorization":
                guard let s = NotificationAuthorizationStatus(rawValue: v) else {
                    throw Arguments.UsageError(description: "authorization: notDetermined, denied, authorized or provisional")
                }
                p.authorization = s
            case "sound": p.sound = try bool()
            case "badge": p.badge = try bool()
            case "showPreviews":
                guard let s = NotificationPreviewSetting(rawValue: v) else { throw Arguments.UsageError(description: "showPreviews: always or never") }
                p.showPreviews = s
            case "timeSensitive": p.timeSensitive = try bool()
            case "criticalAlerts": p.criticalAlerts = try bool()
            case "scheduledSummary": p.scheduledSummary = try bool()
            case "marketing": p.marketing = try bool()
            case "remote": p.remote = try bool()
            default:
                throw Arguments.UsageError(description: "unknown setting \(CommandOutput.text(k)) (authorization, sound, badge, showPreviews, timeSensitive, criticalAlerts, scheduledSummary, marketing, remote)")
            }
            changed = true
        }
        let c = try await connectUser(socket)
        let s = changed ? try await c.call(NotificationMethod.setSettings, p, as: NotificationAppSettings.self)
                        : try await c.call(NotificationMethod.getSettings, p, as: NotificationAppSettings.self)
        if json { CommandOutput.printJSONLine(s) } else { printSettings(app, s) }
        return 0
    }

    /// `register-remote --app ID [--off]`: as the app, registers for remote notifications (issue
    /// 11, N1) and prints where a provider sends them.
    static func registerRemote(socket: String?, _ argv: [String]) async throws -> Int32 {
        let a = try Arguments(argv, flags: ["off", "json"], options: ["app"])
        guard let app = a.value("app"), a.positionals.isEmpty else { throw Arguments.UsageError(description: "register-remote --app ID [--off]") }
        if let why = AppIdentifier.problem(app) { throw Arguments.UsageError(description: "--app: \(why)") }
        let c = try await InterludeClient.connect(socket: socket, app: app)
        if !a.has("off") {
            // As an app does at launch: ask for authorization (N1), then register.
            let auth = try await c.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .sound, .badge]),
                                        as: AuthorizationResult.self)
            if auth.status == .notDetermined || auth.status == .denied {
                CommandOutput.write(Data((CommandOutput.text("interlude: \(app) is \(auth.status == .denied ? "denied" : "not yet authorized") (N1); allow it with `interlude auth \(app) grant`") + "\n").utf8), to: STDERR_FILENO)
            }
        }
        let r = try await c.call(RemoteMethod.registerRemote, RegisterRemoteParams(enabled: !a.has("off")), as: RegisterRemoteResult.self)
        if a.has("json") { CommandOutput.printJSONLine(r); return 0 }
        if !r.registered { print("\(CommandOutput.text(app)): not registered for remote notifications"); return 0 }
        print(CommandOutput.text("\(app): registered for remote notifications" + (r.topic.map { " on \($0) (device \(r.device ?? "?"))" } ?? " (the daemon names no broker yet: remote.broker)")))
        return 0
    }

    static func printSettings(_ app: String, _ s: NotificationAppSettings) {
        let enc = JSONEncoder()
        enc.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        print("\(CommandOutput.text(app)): " + String(decoding: UnsafeText.jsonForTerminal((try? enc.encode(s)) ?? Data()), as: UTF8.self))
    }
}
