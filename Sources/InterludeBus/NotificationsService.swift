import CSystemdBus
import Dispatch
import InterludeEngine
import InterludePolicy
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// The well-known name, object path and interface of the Desktop Notifications spec (1.3).
public enum NotificationsSpec {
    public static let name = "org.freedesktop.Notifications"
    public static let path = "/org/freedesktop/Notifications"
    public static let interface = "org.freedesktop.Notifications"
    /// The spec version `GetServerInformation` reports.
    public static let specVersion = "1.3"
    /// What `GetCapabilities` reports.
    public static let capabilities = ["actions", "body", "persistence", "sound", "inhibitions"]

    /// The introspection data (`org.freedesktop.DBus.Introspectable.Introspect`); gdbus and Qt
    /// read it before they call.
    public static let introspection = """
    <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
     "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
    <node>
      <interface name="org.freedesktop.DBus.Introspectable">
        <method name="Introspect"><arg name="xml_data" type="s" direction="out"/></method>
      </interface>
      <interface name="org.freedesktop.DBus.Peer">
        <method name="Ping"/>
        <method name="GetMachineId"><arg name="machine_uuid" type="s" direction="out"/></method>
      </interface>
      <interface name="org.freedesktop.DBus.Properties">
        <method name="Get">
          <arg name="interface_name" type="s" direction="in"/>
          <arg name="property_name" type="s" direction="in"/>
          <arg name="value" type="v" direction="out"/>
        </method>
        <method name="GetAll">
          <arg name="interface_name" type="s" direction="in"/>
          <arg name="properties" type="a{sv}" direction="out"/>
        </method>
        <signal name="PropertiesChanged">
          <arg name="interface_name" type="s"/>
          <arg name="changed_properties" type="a{sv}"/>
          <arg name="invalidated_properties" type="as"/>
        </signal>
      </interface>
      <interface name="org.freedesktop.Notifications">
        <method name="Notify">
          <arg name="app_name" type="s" direction="in"/>
          <arg name="replaces_id" type="u" direction="in"/>
          <arg name="app_icon" type="s" direction="in"/>
          <arg name="summary" type="s" direction="in"/>
          <arg name="body" type="s" direction="in"/>
          <arg name="actions" type="as" direction="in"/>
          <arg name="hints" type="a{sv}" direction="in"/>
          <arg name="expire_timeout" type="i" direction="in"/>
          <arg name="id" type="u" direction="out"/>
        </method>
        <method name="CloseNotification"><arg name="id" type="u" direction="in"/></method>
        <method name="GetCapabilities"><arg name="capabilities" type="as" direction="out"/></method>
        <method name="GetServerInformation">
          <arg name="name" type="s" direction="out"/>
          <arg name="vendor" type="s" direction="out"/>
          <arg name="version" type="s" direction="out"/>
          <arg name="spec_version" type="s" direction="out"/>
        </method>
        <method name="Inhibit">
          <arg name="desktop_entry" type="s" direction="in"/>
          <arg name="reason" type="s" direction="in"/>
          <arg name="hints" type="a{sv}" direction="in"/>
          <arg name="cookie" type="u" direction="out"/>
        </method>
        <method name="UnInhibit"><arg name="cookie" type="u" direction="in"/></method>
        <property name="Inhibited" type="b" access="read"/>
        <signal name="NotificationClosed"><arg name="id" type="u"/><arg name="reason" type="u"/></signal>
        <signal name="ActionInvoked"><arg name="id" type="u"/><arg name="action_key" type="s"/></signal>
      </interface>
    </node>
    """
}

/// Numbers the bus side reads from the config (`bus.*` in `Config/interlude.json5`).
public struct NotificationsBusConfig: Sendable {
    /// What plays when a notification names no sound (`bus.defaultSound`; `none` = silent).
    public var defaultSound: String
    /// The most bytes of text one `Notify` may carry (`bus.maxNotificationBytes`).
    public var maxNotificationBytes: Int
    /// Makes a config.
    public init(defaultSound: String = "message-new-instant", maxNotificationBytes: Int = 65536) {
        self.defaultSound = defaultSound
        self.maxNotificationBytes = maxNotificationBytes
    }
}

/// Serves `org.freedesktop.Notifications` at `/org/freedesktop/Notifications` on a
/// ``BusConnection``: each call becomes an engine call (``Engine/busNotify(_:)``,
/// ``Engine/busClose(id:app:)``) in the order the calls came, and the engine's removals and
/// action responses come back as `NotificationClosed` and `ActionInvoked` (``NotificationBusPort``).
/// Malformed input (wrong signature, hints of the wrong type, huge bodies, invalid UTF-8, which
/// sd-bus refuses as it reads) gets a D-Bus error and changes nothing.
public final class NotificationsService: NotificationBusPort, @unchecked Sendable {
    let connection: BusConnection
    let engine: Engine
    let config: NotificationsBusConfig
    let version: String
    let log: @Sendable (String) -> Void
    private var slot: OpaquePointer?
    /// Engine work, in the order calls arrived (one consumer task).
    private let jobs: AsyncStream<Job>.Continuation
    private let consumer: Task<Void, Never>

    enum Job: Sendable {
        case notify(BusNotifyCall, BusMessage, executable: String?)
        case close(UInt32, BusMessage, sender: String?)
        case inhibit(app: String, reason: String, BusMessage, sender: String)
        case unInhibit(UInt32, BusMessage, sender: String?)
        case left(String)
    }
    /// The `Inhibited` property as last told by the engine (read on the bus queue).
    private var inhibited = false
    private var matchSlot: OpaquePointer?

    /// Registers the object on `connection` (call ``BusConnection/start()`` after it).
    /// - Throws: ``BusError`` when sd-bus refuses the object.
    public init(connection: BusConnection, engine: Engine, config: NotificationsBusConfig, version: String,
                log: @escaping @Sendable (String) -> Void) throws(BusError) {
        self.connection = connection
        self.engine = engine
        self.config = config
        self.version = version
        self.log = log
        let (stream, continuation) = AsyncStream<Job>.makeStream()
        jobs = continuation
        consumer = Task { [connection, engine, config, log] in
            for await job in stream { await NotificationsService.run(job, connection: connection, engine: engine, config: config, log: log) }
        }
        var s: OpaquePointer?
        let me = Unmanaged.passUnretained(self).toOpaque()
        let r = connection.queue.sync { sd_bus_add_object(connection.bus, &s, NotificationsSpec.path, notificationsObjectCallback, me) }
        guard r >= 0 else { throw BusError("add the object \(NotificationsSpec.path)", r) }
        slot = s
        // Clients that leave the bus release their inhibitions.
        var ms: OpaquePointer?
        let rm = connection.queue.sync {
            sd_bus_add_match(connection.bus, &ms, "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged'",
                             nameOwnerChangedCallback, me)
        }
        if rm >= 0 { matchSlot = ms }
    }

    /// Reads the engine's `Inhibited` once, when the service starts serving.
    public func refreshInhibited() async {
        let now = await engine.busInhibited()
        connection.perform { [self] _ in inhibited = now }
    }

    /// A name changed owner (on the queue): a unique name that lost its owner left the bus.
    func nameOwnerChanged(_ m: OpaquePointer) {
        guard let name = try? MessageReader.string(m, "name"), let _ = try? MessageReader.string(m, "old"),
              let new = try? MessageReader.string(m, "new"), new.isEmpty, name.hasPrefix(":") else { return }
        jobs.yield(.left(name))
    }

    deinit {
        jobs.finish()
        consumer.cancel()
    }

    /// The daemon stops: unregisters the object (no call is taken from now on) and waits, at most
    /// `timeout` seconds, until the calls already taken are decided and answered, so that a
    /// notification saved was answered to its sender (N15), as the socket server does.
    public func shutDown(timeout: Double) async {
        stop()
        let consumer = self.consumer
        _ = await finishes(within: timeout) { await consumer.value }
    }

    /// Unregisters the object (on the queue) and ends the job stream.
    public func stop() {
        connection.queue.sync {
            if let slot { sd_bus_slot_unref(slot) }
            if let matchSlot { sd_bus_slot_unref(matchSlot) }
            slot = nil
            matchSlot = nil
        }
        jobs.finish()
    }

    // MARK: NotificationBusPort

    public func notificationClosed(id: UInt32, reason: UInt32, destination: String?) {
        connection.perform { c in
            c.emitSignal(path: NotificationsSpec.path, interface: NotificationsSpec.interface, member: "NotificationClosed",
                         destination: destination, [.uint32(id), .uint32(reason)])
        }
    }

    public func actionInvoked(id: UInt32, action: String, destination: String?) {
        connection.perform { c in
            c.emitSignal(path: NotificationsSpec.path, interface: NotificationsSpec.interface, member: "ActionInvoked",
                         destination: destination, [.uint32(id), .string(action)])
        }
    }

    public func inhibitedChanged(_ value: Bool) {
        connection.perform { [self] c in
            inhibited = value
            c.emitSignal(path: NotificationsSpec.path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                         destination: nil, [.string(NotificationsSpec.interface), .boolProperties([("Inhibited", value)]), .strings([])])
        }
    }

    // MARK: Dispatch (on the bus queue)

    /// Handles one message sent to the object. Returns 1 (handled) or 0 (not ours: sd-bus goes on).
    func handle(_ m: OpaquePointer) -> Int32 {
        var type: UInt8 = 0
        guard sd_bus_message_get_type(m, &type) >= 0, type == 1 /* SD_BUS_MESSAGE_METHOD_CALL */ else { return 0 }
        let interface = sd_bus_message_get_interface(m).map { String(cString: $0) }
        let member = sd_bus_message_get_member(m).map { String(cString: $0) } ?? ""
        let signature = sd_bus_message_get_signature(m, 1).map { String(cString: $0) } ?? ""
        let call = connection.retain(m)
        defer { connection.release(call) }
        func wrongArgs(_ expected: String) {
            connection.replyError(to: call, BusCallError.invalidArgs("").name,
                                  "\(member) takes (\(expected)), got (\(signature))")
        }
        switch (interface, member) {
        case ("org.freedesktop.DBus.Introspectable", "Introspect"), (nil, "Introspect"):
            guard signature.isEmpty else { wrongArgs(""); return 1 }
            connection.reply(to: call, [.string(NotificationsSpec.introspection)])
        case (NotificationsSpec.interface, "GetCapabilities"), (nil, "GetCapabilities"):
            guard signature.isEmpty else { wrongArgs(""); return 1 }
            connection.reply(to: call, [.strings(NotificationsSpec.capabilities)])
        case (NotificationsSpec.interface, "GetServerInformation"), (nil, "GetServerInformation"):
            guard signature.isEmpty else { wrongArgs(""); return 1 }
            connection.reply(to: call, [.string("Interlude"), .string("Interlude"), .string(version), .string(NotificationsSpec.specVersion)])
        case (NotificationsSpec.interface, "Notify"), (nil, "Notify"):
            let parsed: BusNotifyCall
            do { parsed = try MessageReader.notify(m, maxBytes: config.maxNotificationBytes) } catch {
                log("bus: Notify from \(sd_bus_message_get_sender(m).map { String(cString: $0) } ?? "?") refused: \(error.message)")
                connection.replyError(to: call, error.name, error.message)
                return 1
            }
            lookUpSender(parsed, call)
        case (NotificationsSpec.interface, "CloseNotification"), (nil, "CloseNotification"):
            guard signature == "u" else { wrongArgs("u"); return 1 }
            guard let id = try? MessageReader.uint32(m, "id") else { wrongArgs("u"); return 1 }
            jobs.yield(.close(id, connection.retain(m), sender: sd_bus_message_get_sender(m).map { String(cString: $0) }))
        case (NotificationsSpec.interface, "Inhibit"), (nil, "Inhibit"):
            guard signature == "ssa{sv}", let app = try? MessageReader.string(m, "desktop_entry"),
                  let reason = try? MessageReader.string(m, "reason"),
                  let sender = sd_bus_message_get_sender(m).map({ String(cString: $0) }) else { wrongArgs("ssa{sv}"); return 1 }
            jobs.yield(.inhibit(app: app, reason: reason, connection.retain(m), sender: sender))
        case (NotificationsSpec.interface, "UnInhibit"), (nil, "UnInhibit"):
            guard signature == "u", let cookie = try? MessageReader.uint32(m, "cookie") else { wrongArgs("u"); return 1 }
            jobs.yield(.unInhibit(cookie, connection.retain(m), sender: sd_bus_message_get_sender(m).map { String(cString: $0) }))
        case ("org.freedesktop.DBus.Properties", "Get"):
            guard signature == "ss", let iface = try? MessageReader.string(m, "interface"), let prop = try? MessageReader.string(m, "property") else {
                wrongArgs("ss"); return 1
            }
            guard iface == NotificationsSpec.interface, prop == "Inhibited" else {
                connection.replyError(to: call, "org.freedesktop.DBus.Error.UnknownProperty", "no property \(prop) in \(iface)")
                return 1
            }
            connection.reply(to: call, [.variantBool(inhibited)])
        case ("org.freedesktop.DBus.Properties", "GetAll"):
            guard signature == "s", let iface = try? MessageReader.string(m, "interface") else { wrongArgs("s"); return 1 }
            connection.reply(to: call, [.boolProperties(iface == NotificationsSpec.interface ? [("Inhibited", inhibited)] : [])])
        case ("org.freedesktop.DBus.Properties", "Set"):
            connection.replyError(to: call, "org.freedesktop.DBus.Error.PropertyReadOnly", "Inhibited is read-only")
        case (NotificationsSpec.interface, _):
            connection.replyError(to: call, BusCallError.unknownMethod("").name, "no method \(member) in \(NotificationsSpec.interface)")
        default:
            return 0
        }
        return 1
    }

    /// Asks the bus for the sender's pid (`GetConnectionUnixProcessID`, never the message's own
    /// claim, N3), then queues the call with the executable it runs.
    func lookUpSender(_ parsed: BusNotifyCall, _ call: BusMessage) {
        let pending = PendingLookup(service: self, call: parsed, message: connection.retain(call.raw))
        guard let sender = parsed.sender else { return pending.finish(pid: nil) }
        var q: OpaquePointer?
        guard sd_bus_message_new_method_call(connection.bus, &q, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus", "GetConnectionUnixProcessID") >= 0, let q else {
            return pending.finish(pid: nil)
        }
        defer { sd_bus_message_unref(q) }
        _ = sender.withCString { sd_bus_message_append_basic(q, CChar(UInt8(ascii: "s")), $0) }
        let box = Unmanaged.passRetained(pending).toOpaque()
        if sd_bus_call_async(connection.bus, nil, q, pidReplyCallback, box, 5_000_000) < 0 {
            Unmanaged<PendingLookup>.fromOpaque(box).release()
            pending.finish(pid: nil)
        }
    }

    func enqueue(_ call: BusNotifyCall, _ message: BusMessage, pid: UInt32?) {
        jobs.yield(.notify(call, message, executable: pid.flatMap(NotificationsService.executable(pid:))))
    }

    /// `/proc/PID/exe`, or nil when it cannot be read (the process is gone, or not ours).
    static func executable(pid: UInt32) -> String? {
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/\(pid)/exe", &buf, buf.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: Engine side (the consumer task)

    static func run(_ job: Job, connection: BusConnection, engine: Engine, config: NotificationsBusConfig,
                    log: @escaping @Sendable (String) -> Void) async {
        switch job {
        case let .notify(call, message, executable):
            let result: Result<UInt32, BusCallError>
            do {
                let input = try NotificationMapping.input(call, executable: executable, defaultSound: config.defaultSound)
                do {
                    result = .success(try await engine.busNotify(input).id)
                } catch {
                    result = .failure(busError(error))
                }
            } catch {
                result = .failure(error)
            }
            connection.perform { c in
                switch result {
                case let .success(id): c.reply(to: message, [.uint32(id)])
                case let .failure(e): c.replyError(to: message, e.name, e.message)
                }
                c.release(message)
            }
        case let .close(id, message, sender):
            var failure: BusCallError?
            do { try await engine.busClose(id: id, sender: sender) } catch {
                // The spec: closing one that is already gone is not an error worth a client's crash;
                // report it as the spec's error only when the id never existed.
                if error.code != .notFound { failure = busError(error) }
            }
            let outcome = failure
            connection.perform { c in
                if let failure = outcome { c.replyError(to: message, failure.name, failure.message) } else { c.reply(to: message, []) }
                c.release(message)
            }
        case let .inhibit(app, reason, message, sender):
            let result: Result<UInt32, BusCallError>
            do { result = .success(try await engine.busInhibit(owner: sender, app: app, reason: reason)) } catch { result = .failure(busError(error)) }
            connection.perform { c in
                switch result {
                case let .success(cookie): c.reply(to: message, [.uint32(cookie)])
                case let .failure(e): c.replyError(to: message, e.name, e.message)
                }
                c.release(message)
            }
        case let .unInhibit(cookie, message, sender):
            await engine.busUnInhibit(cookie: cookie, owner: sender)
            connection.perform { c in
                c.reply(to: message, [])
                c.release(message)
            }
        case let .left(name):
            await engine.busClientLeft(name)
        }
    }

    /// The engine's error as a D-Bus error: notAuthorized → AccessDenied (N1), badRequest and
    /// promotionalNotAllowed → InvalidArgs, everything else Failed; the message keeps the code.
    static func busError(_ e: WireError) -> BusCallError {
        let text = "\(e.message) [\(e.code.rawValue)]"
        switch e.code {
        case .notAuthorized: return .accessDenied(text)
        case .badRequest, .promotionalNotAllowed: return .invalidArgs(text)
        default: return .failed(text)
        }
    }
}

/// A `Notify` waiting for its sender's pid.
final class PendingLookup: @unchecked Sendable {
    let service: NotificationsService
    let call: BusNotifyCall
    let message: BusMessage
    init(service: NotificationsService, call: BusNotifyCall, message: BusMessage) {
        self.service = service; self.call = call; self.message = message
    }
    func finish(pid: UInt32?) { service.enqueue(call, message, pid: pid) }
}

/// sd-bus calls this for every message to `/org/freedesktop/Notifications` (on the bus queue).
/// File scope, nonisolated: DESIGN.md's SIGILL trap.
let notificationsObjectCallback: sd_bus_message_handler_t = { m, userdata, _ in
    guard let m, let userdata else { return 0 }
    return Unmanaged<NotificationsService>.fromOpaque(userdata).takeUnretainedValue().handle(m)
}

/// `NameOwnerChanged` from the bus (on the bus queue).
let nameOwnerChangedCallback: sd_bus_message_handler_t = { m, userdata, _ in
    guard let m, let userdata else { return 0 }
    Unmanaged<NotificationsService>.fromOpaque(userdata).takeUnretainedValue().nameOwnerChanged(m)
    return 0
}

/// The reply to `GetConnectionUnixProcessID` (on the bus queue).
let pidReplyCallback: sd_bus_message_handler_t = { m, userdata, _ in
    guard let userdata else { return 0 }
    let pending = Unmanaged<PendingLookup>.fromOpaque(userdata).takeRetainedValue()
    var pid: UInt32 = 0
    if let m, sd_bus_message_is_method_error(m, nil) == 0, sd_bus_message_read_basic(m, CChar(UInt8(ascii: "u")), &pid) > 0 {
        pending.finish(pid: pid)
    } else {
        pending.finish(pid: nil)
    }
    return 1
}
