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
    let service: NotificationsService?
    private let lock = NSLock()
    private var _companion: NotificationsCompanion?
    private var _status: BusStatus
    private var lostSlot: OpaquePointer?
    /// What `status` shows.
    public var status: BusStatus { lock.withLock { _status } }
    var companion: NotificationsCompanion? { lock.withLock { _companion } }

    init(connection: BusConnection?, service: NotificationsService?, companion: NotificationsCompanion?, status: BusStatus) {
        self.connection = connection; self.service = service; self._companion = companion; self._status = status
    }

    /// Server mode: when another daemon takes the name (it asked to replace the owner, which we
    /// allow), Interlude becomes its companion instead of fighting for the name.
    func watchNameLost(engine: Engine, config: NotificationsBusConfig, log: @escaping @Sendable (String) -> Void) {
        guard let connection else { return }
        lostContext = (engine, config, log)
        let me = Unmanaged.passUnretained(self).toOpaque()
        var slot: OpaquePointer?
        let r = connection.queue.sync {
            sd_bus_add_match(connection.bus, &slot, "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameLost'",
                             nameLostCallback, me)
        }
        if r >= 0 { lostSlot = slot }
    }
    var lostContext: (Engine, NotificationsBusConfig, @Sendable (String) -> Void)?

    /// The name was taken (on the bus queue): stop serving and watch as a companion.
    func nameLost(_ name: String) {
        guard name == NotificationsSpec.name, let connection, let (engine, config, log) = lostContext else { return }
        lostContext = nil
        Task { [self] in
            service?.stop()  // off the bus queue: stop() waits on it
            let owner = connection.nameOwner(NotificationsSpec.name)
            log("bus: \(NotificationsSpec.name) was taken by \(owner ?? "another daemon"); watching as its companion")
            let status: BusStatus
            do {
                let c = try NotificationsCompanion(address: connection.address, engine: engine, config: config, lookup: connection, log: log)
                status = BusStatus(mode: "companion", nameOwner: owner, address: connection.address)
                lock.withLock { _companion = c; _status = status }
            } catch {
                log("bus: cannot watch the bus as a companion: \(error)")
                status = BusStatus(mode: "off", nameOwner: owner, address: connection.address, note: "companion failed: \(error)")
                lock.withLock { _status = status }
            }
            await engine.attachBus(nil, status: status)
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
            lock.withLock { _status = status; lostContext = nil }
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
            joined.watchNameLost(engine: engine, config: config, log: log)
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

/// `NameLost` from the bus (on the bus queue). File scope, nonisolated: DESIGN.md's SIGILL trap.
let nameLostCallback: sd_bus_message_handler_t = { m, userdata, _ in
    guard let m, let userdata, let name = try? MessageReader.string(m, "name") else { return 0 }
    Unmanaged<NotificationsBus>.fromOpaque(userdata).takeUnretainedValue().nameLost(name)
    return 0
}
