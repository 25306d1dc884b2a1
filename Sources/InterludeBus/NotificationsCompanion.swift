import CSystemdBus
import Dispatch
import InterludeEngine
import InterludePolicy
import InterludeWire

/// Companion mode: another daemon (dunst, mako, swaync, …) owns `org.freedesktop.Notifications`
/// and shows the notifications. Interlude watches the bus with
/// `org.freedesktop.DBus.Monitoring.BecomeMonitor` (a monitor only receives copies, so the
/// display daemon is never delayed or changed), pairs each `Notify` call with the display
/// daemon's reply (its id), and feeds the same `add` event of the notification core as in server
/// mode: the same rules decide and play the sound, and the notification is in the center and in
/// `explain` under `dbus-ID` with the display daemon's id.
public final class NotificationsCompanion: @unchecked Sendable {
    let monitor: BusConnection
    let engine: Engine
    let config: NotificationsBusConfig
    let log: @Sendable (String) -> Void
    let lookup: BusConnection?
    /// Notify calls waiting for their reply, by (sender, cookie).
    private var waiting: [String: (call: BusNotifyCall, executable: String?)] = [:]
    private let jobs: AsyncStream<(BusNotificationInput, UInt32)>.Continuation
    private let consumer: Task<Void, Never>

    /// Opens a second connection at `address` and makes it a monitor of `Notify` calls and of
    /// replies and errors. `lookup` (the main connection) asks the bus for senders' pids (N3); a
    /// monitor cannot send.
    /// - Throws: ``BusError`` when the bus refuses the connection or the monitor.
    public init(address: String, engine: Engine, config: NotificationsBusConfig, lookup: BusConnection? = nil,
                log: @escaping @Sendable (String) -> Void) throws(BusError) {
        monitor = try BusConnection(address: address, monitor: true)
        self.engine = engine
        self.config = config
        self.log = log
        self.lookup = lookup
        let (stream, continuation) = AsyncStream<(BusNotificationInput, UInt32)>.makeStream()
        jobs = continuation
        consumer = Task { [engine, log] in
            for await (input, id) in stream {
                do {
                    let d = try await engine.busNotify(input, assignedID: id).decision
                    _ = d
                } catch {
                    log("bus companion: notification \(id) of \(input.app) not taken: \(error)")
                }
            }
        }
        try monitor.becomeMonitor(rules: [
            "type='method_call',interface='org.freedesktop.Notifications',member='Notify'",
            "type='method_return'",
            "type='error'",
        ])
        monitor.queue.sync { monitor.monitorHandler = { [unowned self] m in self.handle(m) } }
        monitor.start()
    }

    deinit {
        jobs.finish()
        consumer.cancel()
    }

    /// Stops watching.
    public func stop() {
        monitor.stop()
        jobs.finish()
    }

    /// One monitored message (on the monitor's queue).
    func handle(_ m: OpaquePointer) {
        var type: UInt8 = 0
        guard sd_bus_message_get_type(m, &type) >= 0 else { return }
        switch type {
        case 1:  // a method call: Notify
            guard sd_bus_message_is_method_call(m, NotificationsSpec.interface, "Notify") > 0,
                  let sender = sd_bus_message_get_sender(m).map({ String(cString: $0) }) else { return }
            var cookie: UInt64 = 0
            sd_bus_message_get_cookie(m, &cookie)
            guard let call = try? MessageReader.notify(m, maxBytes: config.maxNotificationBytes) else { return }
            let exe = lookup?.pid(of: sender).flatMap(NotificationsService.executable(pid:))
            if waiting.count > 1000 { waiting.removeAll() }  // replies that never came (the display daemon died)
            waiting["\(sender)#\(cookie)"] = (call, exe)
        case 2, 3:  // a method return or an error
            guard let destination = sd_bus_message_get_destination(m).map({ String(cString: $0) }) else { return }
            var cookie: UInt64 = 0
            guard sd_bus_message_get_reply_cookie(m, &cookie) >= 0,
                  let w = waiting.removeValue(forKey: "\(destination)#\(cookie)") else { return }
            guard type == 2 else { return }  // the display daemon refused it: nothing was shown
            var id: UInt32 = 0
            guard sd_bus_message_read_basic(m, CChar(UInt8(ascii: "u")), &id) > 0, id != 0 else { return }
            do {
                let input = try NotificationMapping.input(w.call, executable: w.executable, defaultSound: config.defaultSound)
                jobs.yield((input, id))
            } catch {
                log("bus companion: notification \(id) not taken: \(error.message)")
            }
        default: break
        }
    }
}

