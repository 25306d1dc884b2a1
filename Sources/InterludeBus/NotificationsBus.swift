import CSystemdBus
import Foundation
import InterludeEngine
import InterludeWire

/// The daemon on the session bus: joins the bus of `DBUS_SESSION_BUS_ADDRESS` and picks the
/// mode (README "D-Bus notifications"):
/// - **server**: `org.freedesktop.Notifications` is free: Interlude owns it and serves it
///   (``NotificationsService``).
/// - **companion**: another daemon owns it: Interlude leaves it alone (unless `replace`), watches
///   the `Notify` calls and replies (``NotificationsCompanion``) and plays the sounds.
/// No bus is a log line, not an error: the mode is then `off`.
public final class NotificationsBus: @unchecked Sendable {
    /// The connection (nil when off).
    public let connection: BusConnection?
    private let lock = NSLock()
    // `@unchecked Sendable`: the fields below are only touched under `lock`.
    private var _service: NotificationsService?
    private var _companion: NotificationsCompanion?
    private var _status: BusStatus
    private var lostSlot: OpaquePointer?
    private var ownerSlot: OpaquePointer?
    /// Set while serving: a `NameLost` then makes Interlude a companion (once).
    private var _serving = false
    /// What a change of mode needs: the engine, the bus settings, the log and the version.
    private var context: (engine: Engine, config: NotificationsBusConfig, log: @Sendable (String) -> Void, version: String)?
    /// What `status` shows.
    public var status: BusStatus { lock.withLock { _status } }
    var service: NotificationsService? { lock.withLock { _service } }
    var companion: NotificationsCompanion? { lock.withLock { _companion } }

    init(connection: BusConnection?, service: NotificationsService?, companion: NotificationsCompanion?, status: BusStatus) {
        self.connection = connection; self._service = service; self._companion = companion; self._status = status
        self._serving = service != nil
    }

    /// Follows the owner of `org.freedesktop.Notifications` in either mode (README "D-Bus
    /// notifications"):
    /// - serving, when another daemon takes the name (it asked to replace the owner, which we
    ///   allow), Interlude becomes its companion instead of fighting for the name (`NameLost`);
    /// - a companion, when the name passes to another daemon, `status` names the new owner; when
    ///   its owner leaves and nobody owns it, Interlude serves it again (allowing replacement, as
    ///   at the start), so `notify-send` keeps working (a stranger's display daemon exited, and
    ///   `notify-send` failed with `ServiceUnknown` while `status` still named the gone owner).
    func watchOwner(engine: Engine, config: NotificationsBusConfig, log: @escaping @Sendable (String) -> Void, version: String) {
        guard let connection else { return }
        lock.withLock { context = (engine, config, log, version) }
        let me = Unmanaged.passUnretained(self).toOpaque()
        var lost: OpaquePointer?, owner: OpaquePointer?
        let (r1, r2) = connection.queue.sync {
            (sd_bus_add_match(connection.bus, &lost, "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameLost'",
                              nameLostCallback, me),
             sd_bus_add_match(connection.bus, &owner, "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
                              + "member='NameOwnerChanged',arg0='\(NotificationsSpec.name)'", notificationsOwnerChangedCallback, me))
        }
        lock.withLock {
            if r1 >= 0 { lostSlot = lost }
            if r2 >= 0 { ownerSlot = owner }
        }
    }

    /// The name was taken (on the bus queue): stop serving and watch as a companion.
    func nameLost(_ name: String) {
        guard name == NotificationsSpec.name, let connection else { return }
        let context: (engine: Engine, config: NotificationsBusConfig, log: @Sendable (String) -> Void, version: String)? = lock.withLock {
            guard _serving else { return nil }
            _serving = false
            return self.context
        }
        guard let (engine, config, log, _) = context else { return }
        Task { [self] in
            service?.stop()  // off the bus queue: stop() waits on it
            let owner = connection.nameOwner(NotificationsSpec.name)
            log("bus: \(NotificationsSpec.name) was taken by \(owner ?? "another daemon"); watching as its companion")
            let status: BusStatus
            do {
                let c = try NotificationsCompanion(address: connection.address, engine: engine, config: config, lookup: connection, log: log)
                status = BusStatus(mode: "companion", nameOwner: owner, address: connection.address)
                lock.withLock { _companion = c; _service = nil; _status = status }
            } catch {
                log("bus: cannot watch the bus as a companion: \(error)")
                status = BusStatus(mode: "off", nameOwner: owner, address: connection.address, note: "companion failed: \(error)")
                lock.withLock { _service = nil; _status = status }
            }
            await engine.attachBus(nil, status: status)
        }
    }

    /// `NameOwnerChanged` of `org.freedesktop.Notifications` (on the bus queue): a companion
    /// follows the new owner, or serves the name again when nobody owns it.
    func ownerChanged(new owner: String) {
        guard let connection else { return }
        let context: (engine: Engine, config: NotificationsBusConfig, log: @Sendable (String) -> Void, version: String)? = lock.withLock {
            _status.mode == "companion" ? self.context : nil
        }
        guard let (engine, config, log, version) = context else { return }
        Task { [self] in
            // Off the bus queue: the connection's calls wait on it.
            guard let me = connection.uniqueName, owner != me else { return }
            if !owner.isEmpty {
                let status = BusStatus(mode: "companion", nameOwner: owner, address: connection.address)
                let changed: Bool = lock.withLock {
                    guard _status.mode == "companion", _status.nameOwner != owner else { return false }
                    _status = status
                    return true
                }
                guard changed else { return }
                log("bus: \(NotificationsSpec.name) is now owned by \(owner); watching as its companion")
                await engine.attachBus(nil, status: status)
                return
            }
            // Nobody owns it: serve it again, as at the start (another daemon may still take it).
            let service: NotificationsService
            do {
                service = try NotificationsService(connection: connection, engine: engine, config: config, version: version, log: log)
            } catch {
                log("bus: \(NotificationsSpec.name) has no owner; cannot serve it: \(error)")
                return
            }
            guard (try? connection.requestName(NotificationsSpec.name, replace: false)) == .owner else {
                service.stop()  // another daemon was quicker: its NameOwnerChanged follows
                return
            }
            let old = companion
            let status = BusStatus(mode: "server", nameOwner: me, address: connection.address)
            lock.withLock { _service = service; _companion = nil; _serving = true; _status = status }
            old?.stop()
            log("bus: \(NotificationsSpec.name) had no owner any more; serving it as \(me) on \(connection.address) (server mode)")
            await engine.attachBus(service, status: status)
            await service.refreshInhibited()
        }
    }

    /// When the bus ends the connection (the session's bus daemon stopped): says so in the log,
    /// `status` shows mode `off` with the reason, and the engine forgets the bus (a stranger's
    /// find: the daemon went on reporting server mode on a bus that was gone, without a word).
    /// The bus is not joined again: a restart of `interluded` (or of the user's session) does.
    func watchBusLost(engine: Engine, log: @escaping @Sendable (String) -> Void) {
        guard let connection else { return }
        let address = connection.address
        connection.whenLost { [self] in
            let status = BusStatus(mode: "off", address: address, note: "the session bus went away")
            log("bus: the session bus at \(address) went away; desktop notifications over D-Bus are off until interluded starts again")
            lock.withLock { _status = status; _serving = false; context = nil }
            Task {
                service?.stop()
                companion?.stop()
                await engine.attachBus(nil, status: status)
            }
        }
    }

    /// Joins the bus at `address` and tells the engine the mode.
    /// - Parameters:
    ///   - address: the bus address; nil or empty = no bus (mode `off`).
    ///   - replace: take the name from a daemon that allows it (`interluded --replace`).
    public static func join(address: String?, engine: Engine, replace: Bool, config: NotificationsBusConfig,
                            version: String, log: @escaping @Sendable (String) -> Void, off reason: String? = nil) async -> NotificationsBus {
        func off(_ why: String) async -> NotificationsBus {
            log("no session bus: \(why); desktop notifications over D-Bus are off")
            let status = BusStatus(mode: "off", address: address, note: why)
            await engine.attachBus(nil, status: status)
            return NotificationsBus(connection: nil, service: nil, companion: nil, status: status)
        }
        if let reason { return await off(reason) }
        guard let address, !address.isEmpty else { return await off("DBUS_SESSION_BUS_ADDRESS is not set") }
        let connection: BusConnection
        do { connection = try BusConnection(address: address) } catch { return await off("\(error)") }
        let service: NotificationsService
        do {
            service = try NotificationsService(connection: connection, engine: engine, config: config, version: version, log: log)
        } catch { return await off("\(error)") }
        connection.start()
        let result: BusConnection.NameResult
        do { result = try connection.requestName(NotificationsSpec.name, replace: replace) } catch { return await off("\(error)") }
        if result == .owner {
            let me = connection.uniqueName
            log("bus: serving \(NotificationsSpec.name) as \(me ?? "?") on \(address) (server mode)")
            let status = BusStatus(mode: "server", nameOwner: me, address: address)
            await engine.attachBus(service, status: status)
            await service.refreshInhibited()
            let joined = NotificationsBus(connection: connection, service: service, companion: nil, status: status)
            joined.watchOwner(engine: engine, config: config, log: log, version: version)
            joined.watchBusLost(engine: engine, log: log)
            return joined
        }
        service.stop()
        let owner = connection.nameOwner(NotificationsSpec.name)
        log("bus: \(NotificationsSpec.name) is owned by \(owner ?? "another daemon"); not taking it (interluded --replace would), watching as its companion")
        let companion: NotificationsCompanion
        do {
            companion = try NotificationsCompanion(address: address, engine: engine, config: config, lookup: connection, log: log)
        } catch {
            log("bus: cannot watch the bus as a companion: \(error)")
            let status = BusStatus(mode: "off", nameOwner: owner, address: address, note: "companion failed: \(error)")
            await engine.attachBus(nil, status: status)
            return NotificationsBus(connection: connection, service: nil, companion: nil, status: status)
        }
        let status = BusStatus(mode: "companion", nameOwner: owner, address: address)
        await engine.attachBus(nil, status: status)
        let joined = NotificationsBus(connection: connection, service: nil, companion: companion, status: status)
        joined.watchOwner(engine: engine, config: config, log: log, version: version)
        joined.watchBusLost(engine: engine, log: log)
        return joined
    }

    /// Leaves the bus as the daemon stops: no call is taken from then on, the calls already taken
    /// are answered (at most `timeout` seconds), then the connection closes.
    public func shutDown(timeout: Double = 5) async {
        await service?.shutDown(timeout: timeout)
        stop()
    }

    /// Leaves the bus (the name is released with the connection).
    public func stop() {
        service?.stop()
        companion?.stop()
        connection?.stop()
    }
}

/// `NameOwnerChanged(name, old, new)` of `org.freedesktop.Notifications` (on the bus queue).
/// File scope, nonisolated: DESIGN.md's SIGILL trap.
let notificationsOwnerChangedCallback: sd_bus_message_handler_t = { m, userdata, _ in
    guard let m, let userdata, let name = try? MessageReader.string(m, "name"), name == NotificationsSpec.name,
          (try? MessageReader.string(m, "old owner")) != nil, let new = try? MessageReader.string(m, "new owner") else { return 0 }
    Unmanaged<NotificationsBus>.fromOpaque(userdata).takeUnretainedValue().ownerChanged(new: new)
    return 0
}

/// `NameLost` from the bus (on the bus queue). File scope, nonisolated: DESIGN.md's SIGILL trap.
let nameLostCallback: sd_bus_message_handler_t = { m, userdata, _ in
    guard let m, let userdata, let name = try? MessageReader.string(m, "name") else { return 0 }
    Unmanaged<NotificationsBus>.fromOpaque(userdata).takeUnretainedValue().nameLost(name)
    return 0
}
