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
    let companion: NotificationsCompanion?
    /// What `status` shows.
    public let status: BusStatus

    init(connection: BusConnection?, service: NotificationsService?, companion: NotificationsCompanion?, status: BusStatus) {
        self.connection = connection; self.service = service; self.companion = companion; self.status = status
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
            return NotificationsBus(connection: connection, service: service, companion: nil, status: status)
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
        return NotificationsBus(connection: connection, service: nil, companion: companion, status: status)
    }

    /// Leaves the bus (the name is released with the connection).
    public func stop() {
        service?.stop()
        companion?.stop()
        connection?.stop()
    }
}
