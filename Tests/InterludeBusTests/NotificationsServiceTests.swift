import Foundation
import InterludeBus
import InterludeConfig
import InterludeEngine
import InterludePolicy
import InterludeTestSupport
import InterludeWire
import Synchronization
import Testing

/// The adapter on a private `dbus-daemon` with real clients no one here wrote: `notify-send`
/// (libnotify), `gdbus` and `dbus-send`. The engine is real, with a fake sound player (what it was
/// asked to play) and an in-memory store; the sounds heard at the output are checked in
/// InterludeEndToEndTests/BusEndToEndTests.
@Suite(.serialized) struct NotificationsServiceTests {
    static var toolsPresent: Bool {
        PrivateBus.available && FileManager.default.isExecutableFile(atPath: "/usr/bin/notify-send")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/gdbus")
    }
    static func required() -> Bool {
        if toolsPresent { return true }
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            Issue.record("dbus-daemon, notify-send (libnotify-bin) or gdbus missing: bus tests may not skip under CI")
        }
        return false
    }

    /// The session bus goes away under the daemon (a stranger's find: `status` went on saying
    /// server mode, and the log said nothing): the log says so and `status` shows `off`.
    @Test(.enabled(if: required()))
    func theBusGoingAwayIsSaidAndStatusShowsOff() async throws {
        let said = Mutex<[String]>([])
        let bus = try PrivateBus("bus-lost")
        let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse("{}")))
        let engine = try Engine(config: config, audio: nil, sounds: FakeSoundPlayer(), store: MemoryNotificationStore(), version: "test")
        await engine.start()
        let link = await NotificationsBus.join(address: bus.address, engine: engine, replace: false, config: NotificationsBusConfig(),
                                               version: "test", log: { line in said.withLock { $0.append(line) } })
        defer { link.stop() }
        #expect(link.status.mode == "server")
        bus.stop()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, await engine.status().bus?.mode != "off" { try await Task.sleep(nanoseconds: 20_000_000) }
        let status = await engine.status().bus
        #expect(status?.mode == "off" && status?.note == "the session bus went away", "\(String(describing: status))")
        #expect(link.status.mode == "off")
        #expect(said.withLock { $0 }.contains { $0.contains("the session bus at \(bus.address) went away") }, "\(said.withLock { $0 })")
    }

    /// A bus, an engine and the adapter joined to it (server mode).
    final class Rig: @unchecked Sendable {
        let bus: PrivateBus
        let engine: Engine
        let sounds = FakeSoundPlayer()
        let link: NotificationsBus
        let cli: Int

        init(_ name: String, config overlay: String = "{}", store: NotificationStoring = MemoryNotificationStore()) async throws {
            bus = try PrivateBus(name)
            let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(overlay)))
            engine = try Engine(config: config, audio: nil, sounds: sounds, store: store, version: "test")
            await engine.start()
            link = await NotificationsBus.join(address: bus.address, engine: engine, replace: false,
                                               config: NotificationsBusConfig(), version: "test", log: { _ in })
            cli = await engine.connect(pid: getpid(), sink: { _ in })
            _ = try await engine.hello(client: cli, app: Engine.userToolApp)
        }

        func stop() {
            link.stop()
            bus.stop()
        }

        func notifySend(_ args: [String]) async throws -> PrivateBus.Output { try await bus.exec("/usr/bin/notify-send", args) }

        func center() async throws -> [NotificationView] {
            try await engine.listNotifications(client: cli, ListNotificationsParams(all: true)).notifications
        }

        func explain(_ app: String, _ id: String) async throws -> NotificationDecision {
            try await engine.explain(client: cli, ExplainParams(app: app, identifier: id)).decision
        }

        /// Waits until `cond` holds (the engine works on its own task after the reply).
        func eventually(_ seconds: Double = 3, _ cond: () async throws -> Bool) async rethrows -> Bool {
            let end = Date().addingTimeInterval(seconds)
            while Date() < end {
                if try await cond() { return true }
                try? await Task.sleep(nanoseconds: 20_000_000)
            }
            return try await cond()
        }
    }

    @Test(.enabled(if: required()))
    func notifySendGetsAnIdAndTheSoundItNames() async throws {
        let rig = try await Rig("ids")
        defer { rig.stop() }
        let status = await rig.engine.busStatus()
        #expect(status?.mode == "server")
        let a = try await rig.notifySend(["-p", "-h", "string:sound-name:message-new-instant", "Hi"])
        #expect(a.status == 0, "\(a.stderr)")
        let id = UInt32(a.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(id != nil && id != 0)
        #expect(await rig.eventually { rig.sounds.plays.count == 1 })
        #expect(rig.sounds.plays.map(\.name) == ["message-new-instant"])
        let b = try await rig.notifySend(["-p", "-a", "org.example.Other", "Two"])
        let id2 = UInt32(b.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(id2 != nil && id2! > id!, "ids are never reused")
        let center = try await rig.center()
        #expect(center.map(\.identifier).sorted() == ["dbus-\(id!)", "dbus-\(id2!)"].sorted())
        #expect(center.first { $0.identifier == "dbus-\(id!)" }?.app == "notify-send")
        // With no sound hint, bus.defaultSound plays (message-new-instant).
        #expect(await rig.eventually { rig.sounds.plays.count == 2 })
        #expect(rig.sounds.plays.count == 2 && rig.sounds.plays[1].name == "message-new-instant")
    }

    /// `maxApps` over the bus: any client names the app of its notifications (`-a`), and each new
    /// name made a record kept for ever, on disk too. With the bound at 4 (the CLI's own record
    /// among them) and a center of 2, twelve new names each get their notification in, and the
    /// saved records stay at 4: those forgotten held nothing (their notification had left the
    /// center). When every record holds something, a new name is refused: `Failed`, with the code.
    @Test(.enabled(if: required()))
    func aFloodOfNewAppNamesKeepsTheAppRecordsBounded() async throws {
        let store = MemoryNotificationStore()
        let rig = try await Rig("maxapps", config: #"{ maxApps: 4, bursts: { maxDeliveredTotal: 2 } }"#, store: store)
        defer { rig.stop() }
        for i in 0..<12 {
            let o = try await rig.notifySend(["-p", "-a", "org.example.Flood\(i)", "n\(i)"])
            #expect(o.status == 0, "\(i): \(o.stderr) \(store.saved.apps.keys.sorted())")
        }
        #expect(await rig.eventually { store.saved.apps.count == 4 }, "\(store.saved.apps.keys.sorted())")
        let apps = Set(store.saved.apps.keys)
        #expect(apps == [Engine.userToolApp, "org.example.Flood9", "org.example.Flood10", "org.example.Flood11"], "\(apps.sorted())")
        #expect(try await rig.center().map(\.app).sorted() == ["org.example.Flood10", "org.example.Flood11"])

        let full = try await Rig("maxapps-full", config: #"{ maxApps: 3 }"#)
        defer { full.stop() }
        for i in 0..<2 { #expect(try await full.notifySend(["-a", "org.example.Kept\(i)", "n\(i)"]).status == 0) }
        let refused = try await full.notifySend(["-a", "org.example.New", "n"])
        #expect(refused.status != 0 && refused.stderr.contains("limitReached") && refused.stderr.contains("maxApps"), "\(refused)")
        #expect(try await full.notifySend(["-a", "org.example.Kept0", "again"]).status == 0, "a known app still notifies")
    }

    /// The daemon stopping during a flood of `Notify` calls (issue 9, as for the socket): the
    /// object is unregistered first, the calls already taken are decided and answered, then the
    /// bus closes. Every notification in the center was answered with its id (N15).
    @Test(.enabled(if: required()))
    func N15_shutDownAnswersEveryCallWhoseNotificationItSaved() async throws {
        // Each commit takes 20 ms, as on a slow disk: calls taken pile up behind the one deciding.
        let rig = try await Rig("shutdown", store: SlowStore())
        defer { rig.bus.stop() }
        let flood = Task {
            await withTaskGroup(of: String?.self) { group in
                for i in 0..<40 {
                    group.addTask {
                        guard let o = try? await rig.notifySend(["-p", "-a", "org.example.Flood", "flood \(i)"]), o.status == 0,
                              let id = UInt32(o.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else { return nil }
                        return "dbus-\(id)"
                    }
                }
                var answered: [String] = []
                for await a in group { if let a { answered.append(a) } }
                return answered
            }
        }
        #expect(try await rig.eventually(10) { try await !rig.center().isEmpty }, "the flood never reached the engine")
        await rig.link.shutDown(timeout: 5)
        let answered = Set(await flood.value)
        let saved = Set(try await rig.center().map(\.identifier))
        #expect(!answered.isEmpty, "answered: \(answered.sorted()), saved: \(saved.sorted())")
        #expect(saved.subtracting(answered).isEmpty, "saved without an answer to the caller: \(saved.subtracting(answered).sorted())")
        #expect(answered.subtracting(saved).isEmpty, "answered but not in the center: \(answered.subtracting(saved).sorted())")
    }

    @Test(.enabled(if: required()))
    func suppressSoundAndUrgencyLowAreSilent() async throws {
        let rig = try await Rig("quiet")
        defer { rig.stop() }
        _ = try await rig.notifySend(["-a", "org.example.A", "-h", "boolean:suppress-sound:true", "-h", "string:sound-name:bell", "quiet"])
        _ = try await rig.notifySend(["-a", "org.example.B", "-u", "low", "low"])  // N5: passive
        try await Task.sleep(nanoseconds: 300_000_000)  // a sound would be asked for by now
        #expect(rig.sounds.plays.isEmpty)
        #expect(try await rig.center().count == 2)
    }

    @Test(.enabled(if: required()))
    func N10_replacesIdKeepsTheIdAndOneEntry() async throws {
        let rig = try await Rig("replace")
        defer { rig.stop() }
        let a = try await rig.notifySend(["-p", "-a", "org.example.R", "one"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let b = try await rig.notifySend(["-p", "-a", "org.example.R", "-r", a, "two"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(a == b)
        let center = try await rig.center()
        #expect(center.count == 1 && center.first?.title == "two")
        #expect(try await rig.explain("org.example.R", "dbus-\(a)").rules.contains("N10"))
        // Another app's id is not replaced: a new id.
        let c = try await rig.notifySend(["-p", "-a", "org.example.Q", "-r", a, "three"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(c != a)
    }

    @Test(.enabled(if: required()))
    func N3_criticalFromAnExecutableNotEntitledIsDowngraded() async throws {
        // Entitled by app id and the executable path: notify-send's name with another path is not.
        let rig = try await Rig("n3", config: #"{ entitledCriticalApps: [{ app: "org.example.Alarm", executablePath: "/nonexistent/alarm" }, { app: "org.example.Clock" }] }"#)
        defer { rig.stop() }
        let sent = try await rig.notifySend(["-p", "-a", "org.example.Alarm", "-u", "critical", "wake"])
        #expect(sent.status == 0, "\(sent.stderr)")
        let a = sent.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let d = try await rig.explain("org.example.Alarm", "dbus-\(a)")
        #expect(d.level == .timeSensitive && d.rules.contains("N3"), "at most time-sensitive, and N3 says why: \(d)")
        let b = try await rig.notifySend(["-p", "-a", "org.example.Clock", "-u", "critical", "wake"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let e = try await rig.explain("org.example.Clock", "dbus-\(b)")
        #expect(e.level == .critical, "\(e)")
        // The claim in the message (sender-pid) is not what is checked: the entitlement bound to
        // an executable path needs that executable (notify-send is not /nonexistent/alarm).
        let c = try await rig.notifySend(["-p", "-a", "org.example.Alarm", "-u", "critical", "-h", "int:sender-pid:1", "wake"])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await rig.explain("org.example.Alarm", "dbus-\(c)").level != .critical)
    }

    @Test(.enabled(if: required()))
    func N3_criticalFromAnEntitledAppPlaysThroughFocusAndRingerSilent() async throws {
        let rig = try await Rig("n3-through", config: #"{ entitledCriticalApps: ["org.example.Clock"] }"#)
        defer { rig.stop() }
        try await rig.engine.setRinger(client: rig.cli, silent: true)
        _ = try await rig.engine.setFocus(client: rig.cli, FocusSetParams(name: "sleep"))
        _ = try await rig.notifySend(["-a", "org.example.Chat", "-h", "string:sound-name:bell", "ordinary"])
        _ = try await rig.notifySend(["-a", "org.example.Clock", "-u", "critical", "-h", "string:sound-name:alarm-clock-elapsed", "wake"])
        #expect(await rig.eventually { rig.sounds.plays.count == 1 })
        try await Task.sleep(nanoseconds: 200_000_000)
        let plays = rig.sounds.plays
        #expect(plays.count == 1 && plays.first?.name == "alarm-clock-elapsed", "only the critical one plays: \(plays.map(\.name))")
        #expect(plays.first?.properties["interlude.critical"] == "1", "through ringer and focus (N3)")
    }

    @Test(.enabled(if: required()))
    func N14_anActionResponseReachesNotifySendAsActionInvoked() async throws {
        let rig = try await Rig("actions")
        defer { rig.stop() }
        let waiting = try rig.bus.start("/usr/bin/stdbuf", ["-oL", "/usr/bin/notify-send", "-p", "-a", "org.example.Ask", "-A", "yes=Yes", "-A", "no=No", "-w", "Question"])
        var id: String?
        #expect(try await rig.eventually(5) {
            id = try await rig.center().first { $0.app == "org.example.Ask" }?.identifier
            return id != nil
        })
        try await rig.engine.respond(client: rig.cli, RespondParams(app: "org.example.Ask", notification: id!, action: "yes"))
        let out = await waiting.ended(timeout: 5)
        let lines = out.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && "dbus-\(lines[0])" == id! && lines[1] == "yes", "notify-send printed \(lines), stderr \(out.stderr)")
        #expect(out.status == 0)
        #expect(try await rig.center().isEmpty, "the answered notification left the center (N14)")
    }

    @Test(.enabled(if: required()))
    func closeNotificationSendsNotificationClosedWithReason3() async throws {
        // A store whose commits are durable later, as SQLite's are: the removal's events come
        // once it is durable (a stranger saw reason 2, the reason being forgotten by then).
        let rig = try await Rig("close", store: SlowStore())
        defer { rig.stop() }
        // The signals go to the app that sent the notification (unicast): dbus-monitor sees them
        // (BecomeMonitor), as companion mode does.
        let monitor = try rig.bus.start("/usr/bin/stdbuf", ["-oL", "/usr/bin/dbus-monitor", "--session",
                                                            "type='signal',interface='org.freedesktop.Notifications'"])
        try await Task.sleep(nanoseconds: 300_000_000)
        // The app closes its own notification (python3-dbus: one connection sends and closes).
        let own = try await rig.bus.exec("/usr/bin/python3", ["-c", """
            import dbus
            n = dbus.Interface(dbus.SessionBus().get_object('org.freedesktop.Notifications', '/org/freedesktop/Notifications', introspect=False),
                               'org.freedesktop.Notifications')
            i = n.Notify('org.example.C', dbus.UInt32(0), '', 'bye', '', dbus.Array([], signature='s'), dbus.Dictionary({}, signature='sv'), -1)
            n.CloseNotification(i)
            print(i)
            """])
        #expect(own.status == 0, "\(own.stderr)")
        let closed = own.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        // Another client cannot close an app's notification: nothing changes.
        let waiting = try rig.bus.start("/usr/bin/stdbuf", ["-oL", "/usr/bin/notify-send", "-p", "-a", "org.example.W", "-w", "wait"])
        var id: String?
        #expect(try await rig.eventually(5) {
            id = try await rig.center().first { $0.app == "org.example.W" }?.identifier
            return id != nil
        })
        let n = String(id!.dropFirst(5))
        let other = try await rig.bus.exec("/usr/bin/gdbus", ["call", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
                                                             "-m", "org.freedesktop.Notifications.CloseNotification", n])
        #expect(other.status == 0, "\(other.stderr)")
        #expect(try await rig.center().count == 1, "another client's CloseNotification changes nothing")
        // The user removes it: NotificationClosed reason 2, and notify-send -w returns.
        _ = try await rig.engine.removeNotifications(client: rig.cli, RemoveNotificationsParams(app: "org.example.W", delivered: [id!]))
        let out = await waiting.ended(timeout: 5)
        #expect(out.status == 0 && out.stdout.hasPrefix(n), "notify-send -w returns when its notification is closed: \(out)")
        try await Task.sleep(nanoseconds: 200_000_000)
        let seen = await monitor.stopped().stdout
        #expect(seen.contains("member=NotificationClosed\n   uint32 \(closed)\n   uint32 3"), "closed by CloseNotification: \(seen)")
        #expect(seen.contains("member=NotificationClosed\n   uint32 \(n)\n   uint32 2"), "dismissed by the user: \(seen)")
        #expect(try await rig.center().isEmpty)
    }

    @Test(.enabled(if: required()))
    func transientIsNotKeptAndCategoryCallIsACall() async throws {
        let rig = try await Rig("transient", store: SlowStore())  // commits durable later, as SQLite's
        defer { rig.stop() }
        let monitor = try rig.bus.start("/usr/bin/stdbuf", ["-oL", "/usr/bin/dbus-monitor", "--session",
                                                            "type='signal',interface='org.freedesktop.Notifications'"])
        try await Task.sleep(nanoseconds: 300_000_000)
        let t = try await rig.notifySend(["-p", "-a", "org.example.T", "-e", "passing"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await rig.center().isEmpty)
        try await Task.sleep(nanoseconds: 200_000_000)
        let seen = await monitor.stopped().stdout
        #expect(seen.contains("member=NotificationClosed\n   uint32 \(t)\n   uint32 1"), "a transient one is closed as expired: \(seen)")
        #expect(await rig.eventually { rig.sounds.plays.count == 1 }, "a transient notification is still heard")
        let c = try await rig.notifySend(["-p", "-a", "org.example.Phone", "-c", "call.incoming", "Alice"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let d = try await rig.explain("org.example.Phone", "dbus-\(c)")
        #expect(d.level == .timeSensitive, "\(d)")
    }

    @Test(.enabled(if: required()))
    func N7_underFocusItIsSilentAndInTheCenter() async throws {
        let rig = try await Rig("focus")
        defer { rig.stop() }
        _ = try await rig.engine.setFocus(client: rig.cli, FocusSetParams(name: "doNotDisturb"))
        let a = try await rig.notifySend(["-p", "-a", "org.example.F", "-h", "string:sound-name:bell", "shh"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        try await Task.sleep(nanoseconds: 300_000_000)  // a sound would be asked for by now
        #expect(rig.sounds.plays.isEmpty)
        #expect(try await rig.center().count == 1)
        #expect(try await rig.explain("org.example.F", "dbus-\(a)").rules.contains("N7"))
    }

    @Test(.enabled(if: required()))
    func malformedInputGetsADBusErrorAndChangesNothing() async throws {
        let rig = try await Rig("malformed")
        defer { rig.stop() }
        func send(_ args: [String]) async throws -> PrivateBus.Output {
            try await rig.bus.exec("/usr/bin/dbus-send", ["--session", "--print-reply", "--dest=org.freedesktop.Notifications",
                                                   "/org/freedesktop/Notifications"] + args)
        }
        func gdbusNotify(_ hints: String, body: String = "b") async throws -> PrivateBus.Output {
            try await rig.bus.exec("/usr/bin/gdbus", ["call", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
                                               "-m", "org.freedesktop.Notifications.Notify", "--", "x", "0", "", "s", body, "[]", hints, "-1"])
        }
        // Wrong signatures.
        let a = try await send(["org.freedesktop.Notifications.Notify", "string:x"])
        #expect(a.status != 0 && a.stderr.contains("InvalidArgs"), "\(a)")
        let b = try await send(["org.freedesktop.Notifications.CloseNotification", "string:x"])
        #expect(b.status != 0 && b.stderr.contains("InvalidArgs"), "\(b)")
        let c = try await send(["org.freedesktop.Notifications.GetCapabilities", "int32:1"])
        #expect(c.status != 0 && c.stderr.contains("InvalidArgs"), "\(c)")
        let d = try await send(["org.freedesktop.Notifications.Frobnicate"])
        #expect(d.status != 0 && d.stderr.contains("UnknownMethod"), "\(d)")
        // Hints of the wrong type.
        let e = try await gdbusNotify("{'urgency': <'high'>}")
        #expect(e.status != 0 && e.stderr.contains("InvalidArgs") && e.stderr.contains("urgency"), "\(e)")
        let f = try await gdbusNotify("{'suppress-sound': <'yes'>}")
        #expect(f.status != 0 && f.stderr.contains("suppress-sound"), "\(f)")
        let g = try await gdbusNotify("{'sound-name': <int32 3>}")
        #expect(g.status != 0 && g.stderr.contains("sound-name"), "\(g)")
        let u = try await gdbusNotify("{'urgency': <byte 7>}")
        #expect(u.status != 0 && u.stderr.contains("urgency"), "\(u)")
        // A huge body (100 kB, beyond bus.maxNotificationBytes; the bus carries it, the adapter refuses it).
        let big = try await gdbusNotify("{}", body: String(repeating: "x", count: 100_000))
        #expect(big.status != 0 && big.stderr.contains("LimitsExceeded"), "\(big.stderr.prefix(300))")
        // Hints the adapter does not read (image-data's struct) are skipped, not refused.
        let img = try await gdbusNotify("{'image-data': <(1, 1, 4, true, 8, 4, [byte 1, 2, 3, 4])>}")
        #expect(img.status == 0, "\(img)")
        #expect(try await rig.center().count == 1, "only the well-formed one was delivered")
        // Invalid UTF-8 never reaches the adapter: the bus refuses the message (dbus-daemon and
        // sd-bus both validate strings), and the service goes on.
        let ok = try await rig.notifySend(["-p", "-a", "org.example.After", "still here"])
        #expect(ok.status == 0)
    }

    @Test(.enabled(if: required()))
    func aClientThatLeavesMidCallChangesNothing() async throws {
        let rig = try await Rig("leaver")
        defer { rig.stop() }
        // A client that sends and leaves at once (python3-dbus, no reply awaited): the reply goes
        // to a name that is gone; nothing else changes.
        let gone = try await rig.bus.exec("/usr/bin/python3", ["-c", """
            import dbus
            b = dbus.SessionBus()
            n = dbus.Interface(b.get_object('org.freedesktop.Notifications', '/org/freedesktop/Notifications', introspect=False),
                               'org.freedesktop.Notifications')
            for i in range(5):
                n.Notify('org.example.Gone', dbus.UInt32(0), '', 'gone %d' % i, '', dbus.Array([], signature='s'),
                         dbus.Dictionary({}, signature='sv'), -1, ignore_reply=True)
            b.flush()
            """])
        #expect(gone.status == 0, "\(gone.stderr)")
        #expect(try await rig.eventually(3) { try await rig.center().filter { $0.app == "org.example.Gone" }.count == 5 })
        let ok = try await rig.notifySend(["-p", "-a", "org.example.After", "still here"])
        #expect(ok.status == 0 && UInt32(ok.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) != nil)
    }

    @Test(.enabled(if: required()))
    func introspectionAndServerInformation() async throws {
        let rig = try await Rig("introspect")
        defer { rig.stop() }
        let i = try await rig.bus.exec("/usr/bin/gdbus", ["introspect", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications"])
        #expect(i.stdout.contains("Notify(in  s app_name") && i.stdout.contains("NotificationClosed(u id"), "\(i.stdout)")
        let s = try await rig.bus.exec("/usr/bin/gdbus", ["call", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
                                                   "-m", "org.freedesktop.Notifications.GetServerInformation"])
        #expect(s.stdout.contains("'1.3'"), "\(s.stdout)")
        let c = try await rig.bus.exec("/usr/bin/gdbus", ["call", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
                                                   "-m", "org.freedesktop.Notifications.GetCapabilities"])
        #expect(c.stdout.contains("'actions'") && c.stdout.contains("'sound'"), "\(c.stdout)")
    }

    @Test(.enabled(if: required()))
    func noBusIsOffNotAnError() async throws {
        let config = try ConfigLoader.load(folders: [])
        let engine = try Engine(config: config, audio: nil, sounds: nil, version: "test")
        let link = await NotificationsBus.join(address: "unix:path=/nonexistent/bus", engine: engine, replace: false,
                                               config: NotificationsBusConfig(), version: "test", log: { _ in })
        #expect(link.status.mode == "off")
        #expect(await engine.busStatus()?.mode == "off")
        let none = await NotificationsBus.join(address: nil, engine: engine, replace: false, config: NotificationsBusConfig(), version: "test", log: { _ in })
        #expect(none.status.mode == "off")
    }
}

/// KDE's do-not-disturb on the same interface: `Inhibit` / `UnInhibit` / `Inhibited` (N7).
@Suite(.serialized) struct InhibitTests {
    static func required() -> Bool {
        NotificationsServiceTests.required() && FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/dbus/__init__.py")
    }

    @Test(.enabled(if: required()))
    func N7_anInhibitionHoldsTheFocusUntilItsClientLeaves() async throws {
        let rig = try await NotificationsServiceTests.Rig("inhibit")
        defer { rig.stop() }
        let monitor = try rig.bus.start("/usr/bin/stdbuf", ["-oL", "/usr/bin/dbus-monitor", "--session",
                                                            "type='signal',interface='org.freedesktop.DBus.Properties'"])
        try await Task.sleep(nanoseconds: 300_000_000)
        // A presentation tool: holds an inhibition while it runs (python3-dbus, a client library no one here wrote).
        let holder = try rig.bus.start("/usr/bin/python3", ["-u", "-c", """
            import dbus, time
            n = dbus.Interface(dbus.SessionBus().get_object('org.freedesktop.Notifications', '/org/freedesktop/Notifications'), 'org.freedesktop.Notifications')
            print(n.Inhibit('org.example.Slides', 'presenting', {}))
            time.sleep(30)
            """])
        #expect(await rig.eventually(5) { await rig.engine.focusStatus().focus == "doNotDisturb" })
        let get = try await rig.bus.exec("/usr/bin/gdbus", ["call", "--session", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
                                                     "-m", "org.freedesktop.DBus.Properties.Get", "org.freedesktop.Notifications", "Inhibited"])
        #expect(get.stdout.contains("<true>"), "\(get)")
        _ = try await rig.notifySend(["-a", "org.example.Chat", "-h", "string:sound-name:bell", "during"])
        try await Task.sleep(nanoseconds: 300_000_000)  // a sound would be asked for by now
        #expect(rig.sounds.plays.isEmpty, "silenced by the focus (N7)")
        _ = await holder.stopped()  // the client leaves the bus: its inhibition goes with it
        #expect(await rig.eventually(5) { await rig.engine.focusStatus().focus == nil })
        try await Task.sleep(nanoseconds: 200_000_000)
        let seen = await monitor.stopped().stdout
        #expect(seen.contains("member=PropertiesChanged") && seen.contains("Inhibited") && seen.contains("boolean true")
                && seen.contains("boolean false"), "a focus change is visible on the bus: \(seen)")
    }

    @Test(.enabled(if: required()))
    func unInhibitReleasesAndAUserFocusIsLeftAlone() async throws {
        // Commits durable 20 ms later, as SQLite's: `Inhibited` read right after each reply is the
        // new value (a stranger read True right after UnInhibit, False 50 ms later).
        let rig = try await NotificationsServiceTests.Rig("uninhibit", store: SlowStore())
        defer { rig.stop() }
        let out = try await rig.bus.exec("/usr/bin/python3", ["-c", """
            import dbus
            n = dbus.Interface(dbus.SessionBus().get_object('org.freedesktop.Notifications', '/org/freedesktop/Notifications'), 'org.freedesktop.Notifications')
            a = n.Inhibit('org.example.Video', 'playing', {})
            print(n.Get('org.freedesktop.Notifications', 'Inhibited', dbus_interface='org.freedesktop.DBus.Properties'))
            b = n.Inhibit('org.example.Video', 'playing too', {})
            n.UnInhibit(a)
            print(a, b, n.Get('org.freedesktop.Notifications', 'Inhibited', dbus_interface='org.freedesktop.DBus.Properties'))
            n.UnInhibit(b)
            print(n.Get('org.freedesktop.Notifications', 'Inhibited', dbus_interface='org.freedesktop.DBus.Properties'))
            """])
        #expect(out.status == 0, "\(out.stderr)")
        let lines = out.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3 && lines[0] == "1" && lines[1].hasSuffix(" 1") && lines[2] == "0", "held: inhibited; none: not: \(lines)")
        // The user's own focus is not turned off by an inhibition's end.
        _ = try await rig.engine.setFocus(client: rig.cli, FocusSetParams(name: "work"))
        _ = try await rig.bus.exec("/usr/bin/python3", ["-c", """
            import dbus
            n = dbus.Interface(dbus.SessionBus().get_object('org.freedesktop.Notifications', '/org/freedesktop/Notifications'), 'org.freedesktop.Notifications')
            n.UnInhibit(n.Inhibit('org.example.Video', 'x', {}))
            """])
        #expect(await rig.engine.focusStatus().focus == "work")
    }
}

/// Bus ids in the engine, without a bus: never 0, never reused, stable across a restart (N15).
@Suite struct BusIDTests {
    func input(_ title: String, replaces: UInt32 = 0, app: String = "org.example.Ids") -> BusNotificationInput {
        BusNotificationInput(app: app, content: NotificationContent(title: title), replacesID: replaces)
    }

    @Test func idsAreNeverReusedAndAboveEverySavedOneAfterARestart() async throws {
        let config = try ConfigLoader.load(folders: [])
        let store = MemoryNotificationStore()
        let first = try Engine(config: config, audio: nil, sounds: nil, store: store, version: "test")
        await first.attachBus(nil, status: BusStatus(mode: "server"))
        var ids: [UInt32] = []
        for i in 0..<3 { ids.append(try await first.busNotify(input("n\(i)")).id) }
        #expect(ids == [1, 2, 3])
        // Closing one does not free its id.
        try await first.busClose(id: 3, app: nil)
        #expect(try await first.busNotify(input("n3")).id == 4)
        #expect(try await first.busNotify(input("again", replaces: 2)).id == 2, "N10: the same id back")
        // A restart on the same state: the persisted ones keep theirs; new ones come above them.
        let second = try Engine(config: config, audio: nil, sounds: nil, store: store, version: "test")
        await second.attachBus(nil, status: BusStatus(mode: "server"))
        #expect(try await second.busNotify(input("after")).id == 5)
        #expect(try await second.busNotify(input("replaced", replaces: 1)).id == 1)
        #expect(try await second.busNotify(input("other app", replaces: 1, app: "org.example.Else")).id == 6,
                "another app's id is not replaced")
    }
}

/// A display daemon that starts after Interlude and replaces the owner (GNOME Shell, or any
/// daemon asking with REPLACE_EXISTING) takes the name; Interlude becomes its companion.
@Suite struct NameLostTests {
    @Test(.enabled(if: InhibitTests.required()))
    func aDaemonThatReplacesTheOwnerMakesInterludeItsCompanion() async throws {
        let rig = try await NotificationsServiceTests.Rig("namelost")
        defer { rig.stop() }
        #expect(await rig.engine.busStatus()?.mode == "server")
        let taker = try rig.bus.start("/usr/bin/python3", ["-u", "-c", """
            import dbus, time
            b = dbus.SessionBus()
            print(b.request_name('org.freedesktop.Notifications', dbus.bus.NAME_FLAG_REPLACE_EXISTING), b.get_unique_name())
            time.sleep(30)
            """])
        defer { _ = taker.stop() }
        #expect(await rig.eventually(20) { await rig.engine.busStatus()?.mode == "companion" })
        #expect(rig.link.status.mode == "companion")
        #expect(rig.link.status.nameOwner?.hasPrefix(":") == true)
    }

    /// A companion follows the name's owner: a second display daemon that replaces the first is
    /// named by `status`, and when the last one leaves Interlude serves the name again and
    /// `notify-send` works (a stranger's display daemon exited: `status` still named it and
    /// `notify-send` failed with `ServiceUnknown`).
    @Test(.enabled(if: InhibitTests.required()))
    func aCompanionFollowsTheOwnerAndServesTheNameWhenNobodyOwnsIt() async throws {
        let rig = try await NotificationsServiceTests.Rig("owner")
        defer { rig.stop() }
        func owner() async throws -> String {
            let r = try await rig.bus.exec("/usr/bin/gdbus", ["call", "--session", "-d", "org.freedesktop.DBus", "-o", "/org/freedesktop/DBus",
                                                            "-m", "org.freedesktop.DBus.GetNameOwner", "org.freedesktop.Notifications"])
            return r.stdout.trimmingCharacters(in: CharacterSet(charactersIn: "(',)\n "))
        }
        // Flags: 1 allow replacement, 2 replace existing, 4 do not queue (dbus-python's numbering).
        func displayDaemon(flags: Int) throws -> PrivateBus.Background {
            try rig.bus.start("/usr/bin/python3", ["-u", "-c", """
                import dbus, time
                b = dbus.SessionBus()
                b.request_name('org.freedesktop.Notifications', \(flags))
                time.sleep(60)
                """])
        }
        let first = try displayDaemon(flags: 1 | 2 | 4)
        defer { _ = first.stop() }
        #expect(await rig.eventually(20) { await rig.engine.busStatus()?.mode == "companion" })
        let firstName = try await owner()
        #expect(await rig.eventually(5) { await rig.engine.busStatus()?.nameOwner == firstName }, "\(String(describing: rig.link.status))")
        let second = try displayDaemon(flags: 2 | 4)
        #expect(try await rig.eventually(20) { try await owner() != firstName })
        let secondName = try await owner()
        #expect(await rig.eventually(5) { await rig.engine.busStatus()?.nameOwner == secondName },
                "status names the new owner \(secondName): \(String(describing: rig.link.status))")
        _ = await second.stopped()
        #expect(await rig.eventually(10) { await rig.engine.busStatus()?.mode == "server" }, "\(String(describing: rig.link.status))")
        #expect(rig.link.status.mode == "server")
        #expect(try await owner() == rig.link.connection?.uniqueName)
        let sent = try await rig.notifySend(["-p", "-a", "org.example.Back", "served again"])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(try await rig.center().contains { $0.app == "org.example.Back" })
    }
}

/// A store whose every commit is durable 20 ms after it is submitted (a slow disk).
final class SlowStore: NotificationStoring, @unchecked Sendable {
    private let memory = MemoryNotificationStore()
    func load() throws -> NotificationState { try memory.load() }
    func save(_ state: NotificationState) throws { try memory.save(state) }
    func submit(_ state: NotificationState) -> NotificationCommit {
        do { try memory.save(state) } catch { return .failed(error) }
        return NotificationCommit(tracker: Durable(at: DispatchTime.now() + .milliseconds(20)))
    }

    /// Durable from `at` on.
    struct Durable: NotificationCommitTracking {
        let at: DispatchTime
        func settledNow() -> (any Error)?? { DispatchTime.now() >= at ? .some(nil) : nil }
        func whenSettled(_ body: @escaping @Sendable ((any Error)?) -> Void) {
            DispatchQueue.global().asyncAfter(deadline: at) { body(nil) }
        }
    }
}
