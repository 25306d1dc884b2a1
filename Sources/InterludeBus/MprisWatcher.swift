import CSystemdBus
import Foundation
import InterludeEngine
import InterludePolicy
#if canImport(Glibc)
import Glibc
#endif

/// MPRIS media players on the session bus (issue 10), through sd-bus: the engine's
/// ``MediaPlayerControl`` port.
///
/// Watches `org.mpris.MediaPlayer2.*` names: `ListNames` at start, then `NameOwnerChanged`
/// (match `arg0namespace='org.mpris.MediaPlayer2'`). For each player it reads the bus peer's pid
/// (`GetConnectionUnixProcessID`), `Identity` and `DesktopEntry` (`org.mpris.MediaPlayer2`), and
/// `PlaybackStatus`, `CanPause`, `CanPlay`, `CanControl` (`org.mpris.MediaPlayer2.Player`), and
/// follows the values each `PropertiesChanged` from that peer carries. What it sees goes to the engine
/// in order (``Engine/playerAppeared(_:)``, ``Engine/playerChanged(_:_:)``,
/// ``Engine/playerVanished(_:)``); the engine's `pausePlayer`/`resumePlayer` effects come back as
/// `Pause`, `Play` or `PlayPause` calls.
///
/// Its own connection and queue (``BusConnection``): a player that is slow to answer delays
/// only this watcher, never the notifications service. Calls to players time out after
/// ``callTimeoutUsec``. Activatable names that nobody owns (`playerctld`) are not players until
/// they run: `ListNames` does not list them.
public final class MprisWatcher: MediaPlayerControl, @unchecked Sendable {
    /// The prefix of every MPRIS player's bus name.
    public static let prefix = "org.mpris.MediaPlayer2."
    /// The object path every MPRIS player serves.
    public static let path = "/org/mpris/MediaPlayer2"
    /// How long a call to a player may take before it counts as failed (µs; 1 s).
    public static let callTimeoutUsec: UInt64 = 1_000_000
    /// When a player that did not answer as it appeared is read again (seconds after each failed
    /// try): a player starting on a loaded machine may answer its first `GetAll` after
    /// ``callTimeoutUsec`` (mpv's plugin waits for mpv's core, busy opening the file and the audio
    /// output). About 12 s of tries, then it is left untracked (logged) until its name changes owner.
    public static let appearRetryDelays: [Double] = [0.25, 0.5, 1, 2, 4]

    /// What the watcher tells the engine, in order.
    enum Event: Sendable {
        case appeared(MediaPlayerInfo)
        case changed(String, PlayerFacts)
        case vanished(String)
    }

    /// The connection (its queue runs every sd-bus call of this watcher).
    public let connection: BusConnection
    let engine: Engine
    let log: @Sendable (String) -> Void
    private let events: AsyncStream<Event>
    private let sink: AsyncStream<Event>.Continuation
    // On the queue only:
    private var slots: [OpaquePointer] = []
    /// Well-known player name → the unique name that owns it.
    private var owners: [String: String] = [:]
    /// Each player's `org.mpris.MediaPlayer2.Player` properties as last read or signalled.
    private var playerProperties: [String: [String: BusHintValue]] = [:]
    private var consumer: Task<Void, Never>?

    /// Opens its own connection to the bus at `address`.
    /// - Throws: ``BusError`` when the bus cannot be reached.
    public init(address: String, engine: Engine, log: @escaping @Sendable (String) -> Void) throws(BusError) {
        connection = try BusConnection(address: address)
        self.engine = engine
        self.log = log
        (events, sink) = AsyncStream.makeStream(of: Event.self)
    }

    /// Subscribes to the signals, lists the players already there, and starts feeding the engine.
    /// - Throws: ``BusError`` when the bus refuses the match rules.
    public func start() async throws(BusError) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        let rules: [(String, sd_bus_message_handler_t)] = [
            ("type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0namespace='org.mpris.MediaPlayer2'",
             mprisNameOwnerChangedCallback),
            ("type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',path='/org/mpris/MediaPlayer2'",
             mprisPropertiesChangedCallback),
        ]
        for (rule, cb) in rules {
            let r: Int32 = connection.queue.sync {
                var slot: OpaquePointer?
                let r = sd_bus_add_match(connection.bus, &slot, rule, cb, me)
                if r >= 0, let slot { slots.append(slot) }
                return r
            }
            guard r >= 0 else { throw BusError("add the match \(rule)", r) }
        }
        await engine.attachPlayers(self)
        let events = self.events
        let engine = self.engine
        // A player's state is audio work: the engine's audio lane (EngineExecutor).
        consumer = Task(priority: EngineExecutor.audioLanePriority) {
            for await e in events {
                switch e {
                case let .appeared(info): await engine.playerAppeared(info)
                case let .changed(name, facts): await engine.playerChanged(name, facts)
                case let .vanished(name): await engine.playerVanished(name)
                }
            }
        }
        connection.whenLost { [log, address = connection.address] in
            log("mpris: the session bus at \(address) went away; media players are not watched until interluded starts again")
            Task(priority: EngineExecutor.audioLanePriority) { await engine.playersUnwatched() }
        }
        connection.start()
        connection.perform { [self] _ in
            let names = listNames().filter { $0.hasPrefix(Self.prefix) }.sorted()
            log("mpris: watching players on \(connection.address)\(names.isEmpty ? "" : "; found " + names.joined(separator: ", "))")
            for n in names { appear(n) }
        }
    }

    /// Stops watching (the engine keeps the players it has until the daemon ends).
    public func stop() {
        connection.queue.sync {
            for s in slots { sd_bus_slot_unref(s) }
            slots = []
        }
        sink.finish()
        connection.stop()
    }

    // MARK: MediaPlayerControl

    /// `org.mpris.MediaPlayer2.Player.Pause` on `player`.
    public func pause(_ player: String) async -> String? {
        await call(player, "Pause")
    }

    /// `Play`, or `PlayPause` with `usePlayPause`, on `player`.
    public func play(_ player: String, usePlayPause: Bool) async -> String? {
        await call(player, usePlayPause ? "PlayPause" : "Play")
    }

    /// A method of `org.mpris.MediaPlayer2.Player` without arguments; nil when it returned, else the error.
    func call(_ player: String, _ member: String) async -> String? {
        await withCheckedContinuation { (k: CheckedContinuation<String?, Never>) in
            // Not `perform`: it skips its body on a closed connection, and the caller would wait
            // for ever. On a closed connection sd_bus_call fails at once (ENOTCONN).
            connection.queue.async { [self] in
                switch blockingCall(player, Self.path, "org.mpris.MediaPlayer2.Player", member, []) {
                case let .success(reply): sd_bus_message_unref(reply); k.resume(returning: nil)
                case let .failure(e): k.resume(returning: e.text)
                }
                connection.pump()
            }
        }
    }

    // MARK: On the queue

    /// Why a call to the bus or a player failed (the D-Bus error name and message, or errno's text).
    struct CallFailure: Error { var text: String }

    /// A blocking method call on the queue (the reply is the caller's to unref).
    func blockingCall(_ destination: String, _ path: String, _ interface: String, _ member: String,
                      _ args: [BusValue]) -> Result<OpaquePointer, CallFailure> {
        dispatchPrecondition(condition: .onQueue(connection.queue))
        var m: OpaquePointer?
        guard sd_bus_message_new_method_call(connection.bus, &m, destination, path, interface, member) >= 0, let m else {
            return .failure(CallFailure(text: "cannot build \(member)"))
        }
        defer { sd_bus_message_unref(m) }
        for a in args { _ = a.append(to: m) }
        var err = sd_bus_error()
        var reply: OpaquePointer?
        let r = sd_bus_call(connection.bus, m, Self.callTimeoutUsec, &err, &reply)
        defer { sd_bus_error_free(&err) }
        guard r >= 0, let reply else {
            let name = err.name.map { String(cString: $0) } ?? String(cString: strerror(-r))
            return .failure(CallFailure(text: "\(member): \(name)\(err.message.map { " " + String(cString: $0) } ?? "")"))
        }
        return .success(reply)
    }

    func listNames() -> [String] {
        guard case let .success(reply) = blockingCall("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                      "ListNames", []) else { return [] }
        defer { sd_bus_message_unref(reply) }
        var names: [String] = []
        guard sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "a")), "s") > 0 else { return [] }
        while let s = try? MessageReader.string(reply, "name") { names.append(s) }
        return names
    }

    func stringReply(_ member: String, _ arg: String) -> String? {
        guard case let .success(reply) = blockingCall("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                      member, [.string(arg)]) else { return nil }
        defer { sd_bus_message_unref(reply) }
        return try? MessageReader.string(reply, "reply")
    }

    func pid(ofOwner owner: String) -> Int32? {
        guard case let .success(reply) = blockingCall("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                      "GetConnectionUnixProcessID", [.string(owner)]) else { return nil }
        defer { sd_bus_message_unref(reply) }
        return (try? MessageReader.uint32(reply, "pid")).map { Int32(bitPattern: $0) }
    }

    /// `org.freedesktop.DBus.Properties.GetAll(interface)` of a player; nil when it does not answer.
    func properties(_ player: String, _ interface: String) -> [String: BusHintValue]? {
        guard case let .success(reply) = blockingCall(player, Self.path, "org.freedesktop.DBus.Properties", "GetAll",
                                                      [.string(interface)]) else { return nil }
        defer { sd_bus_message_unref(reply) }
        return try? MprisWatcher.readProperties(reply)
    }

    /// Reads an `a{sv}` (GetAll's reply, PropertiesChanged's second argument) at the message's
    /// current position.
    /// - Throws: ``BusCallError`` when it is not one.
    static func readProperties(_ m: OpaquePointer) throws(BusCallError) -> [String: BusHintValue] {
        guard sd_bus_message_enter_container(m, CChar(UInt8(ascii: "a")), "{sv}") > 0 else { throw .invalidArgs("properties must be a{sv}") }
        var out: [String: BusHintValue] = [:]
        while sd_bus_message_enter_container(m, CChar(UInt8(ascii: "e")), "sv") > 0 {
            let key = try MessageReader.string(m, "a property's name")
            out[key] = try MessageReader.variant(m, key)
            sd_bus_message_exit_container(m)
        }
        sd_bus_message_exit_container(m)
        return out
    }

    /// The `Player` facts from its properties. A player that omits a `Can*` property is taken to
    /// allow it, as the spec's defaults have it; an unknown `PlaybackStatus` counts as Stopped.
    static func facts(_ p: [String: BusHintValue]) -> PlayerFacts {
        func flag(_ k: String) -> Bool { if case let .bool(b)? = p[k] { return b } else { return true } }
        var status = PlaybackStatus.stopped
        if case let .string(s)? = p["PlaybackStatus"], let st = PlaybackStatus(rawValue: s) { status = st }
        let control = flag("CanControl")
        return PlayerFacts(status: status, canPause: control && flag("CanPause"), canPlay: control && flag("CanPlay"), canControl: control)
    }

    /// A player name got an owner (or was there at start): read it and tell the engine. A player
    /// that does not answer `GetAll(org.mpris.MediaPlayer2.Player)` is read again after each of
    /// ``appearRetryDelays`` while the same owner holds the name and it is not tracked meanwhile
    /// (it used to be left untracked for good after one slow answer).
    /// - Parameter attempt: the tries made before this one.
    func appear(_ name: String, attempt: Int = 0) {
        guard let owner = stringReply("GetNameOwner", name) else { return }
        owners[name] = owner
        let pid = pid(ofOwner: owner)
        let root = properties(name, "org.mpris.MediaPlayer2") ?? [:]
        guard let player = properties(name, "org.mpris.MediaPlayer2.Player") else {
            owners[name] = nil
            guard attempt < Self.appearRetryDelays.count else {
                log("mpris: \(name) does not answer GetAll(org.mpris.MediaPlayer2.Player) after \(attempt + 1) tries; not tracked")
                return
            }
            let delay = Self.appearRetryDelays[attempt]
            log("mpris: \(name) does not answer GetAll(org.mpris.MediaPlayer2.Player) yet; reading it again in \(delay) s")
            connection.queue.asyncAfter(deadline: .now() + delay) { [self] in
                connection.perform { [self] _ in
                    // Tracked meanwhile (a new owner's NameOwnerChanged), or another owner now:
                    // that owner's own NameOwnerChanged reads it.
                    guard owners[name] == nil, stringReply("GetNameOwner", name) == owner else { return }
                    appear(name, attempt: attempt + 1)
                }
            }
            return
        }
        func str(_ k: String) -> String? { if case let .string(s)? = root[k], !s.isEmpty { return s } else { return nil } }
        playerProperties[name] = player
        sink.yield(.appeared(MediaPlayerInfo(busName: name, pid: pid, identity: str("Identity"), desktopEntry: str("DesktopEntry"),
                                             facts: Self.facts(player))))
    }

    /// `NameOwnerChanged(name, old, new)` for a player name.
    func nameOwnerChanged(_ name: String, old: String, new: String) {
        guard name.hasPrefix(Self.prefix) else { return }
        if !old.isEmpty, owners.removeValue(forKey: name) != nil {
            playerProperties[name] = nil
            sink.yield(.vanished(name))
        }
        if !new.isEmpty { appear(name) }
    }

    /// `PropertiesChanged` of `org.mpris.MediaPlayer2.Player` from the unique name `sender`, with
    /// the values it carries (in the order the player sent them: a `Paused` then a user's
    /// `Playing` are two changes, not one read after both). Properties it names as invalidated
    /// are read again (`GetAll`), after this dispatch.
    func propertiesChanged(sender: String, changed: [String: BusHintValue], invalidated: [String]) {
        for (name, owner) in owners where owner == sender {
            var p = playerProperties[name] ?? [:]
            p.merge(changed) { _, new in new }
            playerProperties[name] = p
            sink.yield(.changed(name, Self.facts(p)))
            if !invalidated.isEmpty {
                connection.perform { [self] _ in
                    guard owners[name] == sender, let fresh = properties(name, "org.mpris.MediaPlayer2.Player") else { return }
                    playerProperties[name] = fresh
                    sink.yield(.changed(name, Self.facts(fresh)))
                }
            }
        }
    }
}

/// `NameOwnerChanged` (on the bus queue). File scope, nonisolated: DESIGN.md's SIGILL trap.
let mprisNameOwnerChangedCallback: sd_bus_message_handler_t = { m, userdata, _ in
    guard let m, let userdata,
          let name = try? MessageReader.string(m, "name"), let old = try? MessageReader.string(m, "old owner"),
          let new = try? MessageReader.string(m, "new owner") else { return 0 }
    let w = Unmanaged<MprisWatcher>.fromOpaque(userdata).takeUnretainedValue()
    // The reads block on calls: run them after this dispatch, not inside sd_bus_process.
    w.connection.perform { _ in w.nameOwnerChanged(name, old: old, new: new) }
    return 0
}

/// `PropertiesChanged(interface, changed a{sv}, invalidated as)` on `/org/mpris/MediaPlayer2` (on
/// the bus queue). Read here, in order; a malformed one is ignored.
let mprisPropertiesChangedCallback: sd_bus_message_handler_t = { m, userdata, _ in
    guard let m, let userdata, let sender = sd_bus_message_get_sender(m).map({ String(cString: $0) }),
          let interface = try? MessageReader.string(m, "interface"), interface == "org.mpris.MediaPlayer2.Player",
          let changed = try? MprisWatcher.readProperties(m) else { return 0 }
    var invalidated: [String] = []
    if sd_bus_message_enter_container(m, CChar(UInt8(ascii: "a")), "s") > 0 {
        while let s = try? MessageReader.string(m, "an invalidated property") { invalidated.append(s) }
        sd_bus_message_exit_container(m)
    }
    let w = Unmanaged<MprisWatcher>.fromOpaque(userdata).takeUnretainedValue()
    w.propertiesChanged(sender: sender, changed: changed, invalidated: invalidated)
    return 0
}
