import CSystemdBus
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// An error of the sd-bus adapter: what failed and the system's reason (`-errno` from sd-bus).
public struct BusError: Error, CustomStringConvertible, Sendable {
    /// What was being done, e.g. "connect to unix:path=/run/user/0/bus".
    public var what: String
    /// The negated errno sd-bus returned (0 when not from sd-bus).
    public var code: Int32
    public var description: String { code == 0 ? what : "\(what): \(String(cString: strerror(-code)))" }
    init(_ what: String, _ code: Int32 = 0) { self.what = what; self.code = code }
}

/// One sd-bus message pointer that may be handed between the bus queue and the engine's task.
/// Only ever dereferenced on the connection's queue; ``BusConnection/retain(_:)`` and
/// ``BusConnection/release(_:)`` keep it alive across the hop.
public struct BusMessage: @unchecked Sendable {
    let raw: OpaquePointer
}

/// A D-Bus connection through sd-bus (`sd_bus_*` from libsystemd), owned by one serial queue:
/// sd-bus is not thread-safe, so every call on the handle runs on ``queue``. A `DispatchSource`
/// on `sd_bus_get_fd` wakes the queue, which loops `sd_bus_process` and then `sd_bus_flush`; a
/// timer follows `sd_bus_get_timeout` (method-call timeouts). Callbacks from sd-bus are plain C
/// function pointers defined in this (nonisolated) library: DESIGN.md's SIGILL trap.
public final class BusConnection: @unchecked Sendable {
    /// The queue every sd-bus call runs on.
    public let queue = DispatchQueue(label: "interlude.bus")
    let bus: OpaquePointer
    private var readSource: DispatchSourceRead?
    private var timer: DispatchSourceTimer?
    private var closed = false
    /// Called once, on the queue, when the bus ends the connection (not after ``stop()``).
    private var onLost: (@Sendable () -> Void)?
    /// For a monitor: called on the queue with each message seen.
    var monitorHandler: ((OpaquePointer) -> Void)?
    /// The address this connection was opened on.
    public let address: String

    /// Opens a client connection to the bus at `address` (a D-Bus address such as
    /// `unix:path=/tmp/bus`) and says Hello.
    /// - Parameter monitor: a connection that will call `BecomeMonitor` (`sd_bus_set_monitor`):
    ///   sd-bus then leaves the messages it sees unanswered.
    /// - Throws: ``BusError`` with the sd-bus reason (no such socket, refused, auth failed).
    public init(address: String, monitor: Bool = false) throws(BusError) {
        var b: OpaquePointer?
        var r = sd_bus_new(&b)
        guard r >= 0, let b else { throw BusError("sd_bus_new", r) }
        r = sd_bus_set_address(b, address)
        if r >= 0 { r = sd_bus_set_bus_client(b, 1) }
        if r >= 0, monitor { r = sd_bus_set_monitor(b, 1) }
        if r >= 0 { r = sd_bus_start(b) }
        guard r >= 0 else { sd_bus_unref(b); throw BusError("connect to \(address)", r) }
        self.bus = b
        self.address = address
    }

    deinit {
        sd_bus_flush_close_unref(bus)
    }

    /// Starts watching the connection's socket: from now on incoming messages are dispatched on
    /// ``queue`` to the registered objects and filters.
    ///
    /// The source watches a duplicate of sd-bus's descriptor, closed only once the source is off
    /// it: sd-bus closes its own when the connection ends (`sd_bus_close`, also by itself when the
    /// bus goes away), and a number closed under a live source could be reused (by a client's
    /// connection) while libdispatch still watched it, whose late unregistration then removed the
    /// new descriptor's watch (seen under strace: libdispatch's `EPOLL_CTL_DEL` of the bus's number
    /// failing with EBADF after each stop).
    public func start() {
        queue.sync {
            let busFD = sd_bus_get_fd(bus)
            guard busFD >= 0 else { return }
            let fd = fcntl(busFD, F_DUPFD_CLOEXEC, 0)
            guard fd >= 0 else { return }
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { @Sendable [weak self] in self?.pump() }
            source.setCancelHandler { _ = close(fd) }
            source.resume()
            readSource = source
            let t = DispatchSource.makeTimerSource(queue: queue)
            t.setEventHandler { @Sendable [weak self] in self?.pump() }
            t.resume()
            timer = t
            pump()
        }
    }

    /// Stops watching and closes the connection (on the queue). Objects and names go with it.
    public func stop() {
        queue.sync {
            guard !closed else { return }
            closed = true
            stopWatching()
            sd_bus_flush(bus)
            sd_bus_close(bus)
        }
    }

    /// Calls `body` once, on the queue, if the bus ends the connection (the bus daemon stopped or
    /// dropped us); not when ``stop()`` closes it. The connection does nothing more after that.
    public func whenLost(_ body: @escaping @Sendable () -> Void) {
        queue.sync { onLost = body }
    }

    /// The descriptor the read source watches (the duplicate), while it does; for tests.
    var watchedDescriptor: Int32? { queue.sync { readSource.map { Int32($0.handle) } } }

    /// Cancels the read source (its descriptor is closed when it is off it) and the timer. On the queue.
    private func stopWatching() {
        readSource?.cancel()
        timer?.cancel()
        readSource = nil
        timer = nil
    }

    /// Processes every queued message, flushes what was sent, and re-arms the timeout timer.
    /// On the queue only.
    func pump() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !closed else { return }
        while true {
            // A monitor connection (sd_bus_set_monitor) hands each message back instead of
            // dispatching it.
            var m: OpaquePointer?
            let r = monitorHandler == nil ? sd_bus_process(bus, nil) : sd_bus_process(bus, &m)
            if let m {
                monitorHandler?(m)
                sd_bus_message_unref(m)
            }
            if r <= 0 { break }
        }
        // The bus went away (sd-bus closed its descriptor): our duplicate would stay readable
        // (at its end) and wake the queue for ever.
        if sd_bus_is_open(bus) <= 0 {
            stopWatching()
            closed = true
            let lost = onLost
            onLost = nil
            lost?()
            return
        }
        sd_bus_flush(bus)
        var usec: UInt64 = 0
        if sd_bus_get_timeout(bus, &usec) >= 0, usec != UInt64.max {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let nowUsec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
            let delta = usec > nowUsec ? usec - nowUsec : 0
            timer?.schedule(deadline: .now() + .microseconds(Int(min(delta, 3_600_000_000))))
        } else {
            timer?.schedule(deadline: .distantFuture)
        }
    }

    /// This connection's unique name on the bus (`:1.42`).
    public var uniqueName: String? {
        queue.sync {
            var p: UnsafePointer<CChar>?
            guard sd_bus_get_unique_name(bus, &p) >= 0, let p else { return nil }
            return String(cString: p)
        }
    }

    /// How `requestName` went.
    public enum NameResult: Sendable, Equatable {
        /// This connection owns the name now.
        case owner
        /// Another connection owns it (and did not allow replacement, or `replace` was false).
        case taken
    }

    /// `RequestName` (`sd_bus_request_name`): allows later replacement by another daemon (a
    /// user's display daemon started after us); with `replace`, takes the name from an owner that
    /// allows it.
    /// - Throws: ``BusError`` for any failure other than the name being taken.
    public func requestName(_ name: String, replace: Bool) throws(BusError) -> NameResult {
        let r: Int32 = queue.sync {
            let flags: UInt64 = (1 << 1) | (replace ? 1 << 0 : 0)  // ALLOW_REPLACEMENT, REPLACE_EXISTING
            return sd_bus_request_name(bus, name, flags)
        }
        if r == -EEXIST || r == -EALREADY { return r == -EALREADY ? .owner : .taken }
        guard r >= 0 else { throw BusError("request the name \(name)", r) }
        return .owner
    }

    /// The unique name owning `name` (`GetNameOwner`), or nil when nobody owns it.
    public func nameOwner(_ name: String) -> String? {
        try? callString("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", argument: name)
    }

    /// A blocking method call with one string argument and one string result (for start-up and
    /// tests; not for the bus queue's own callbacks).
    /// - Throws: ``BusError`` with the D-Bus error name and message.
    public func callString(_ destination: String, _ path: String, _ interface: String, _ member: String,
                           argument: String?) throws(BusError) -> String {
        let out: Result<String, BusError> = queue.sync {
            var m: OpaquePointer?
            var r = sd_bus_message_new_method_call(bus, &m, destination, path, interface, member)
            guard r >= 0, let m else { return .failure(BusError("new call \(member)", r)) }
            defer { sd_bus_message_unref(m) }
            if let argument {
                r = argument.withCString { sd_bus_message_append_basic(m, CChar(UInt8(ascii: "s")), $0) }
                guard r >= 0 else { return .failure(BusError("append", r)) }
            }
            var err = sd_bus_error()
            var reply: OpaquePointer?
            r = sd_bus_call(bus, m, 5_000_000, &err, &reply)
            defer { sd_bus_error_free(&err); if let reply { sd_bus_message_unref(reply) } }
            guard r >= 0, let reply else {
                return .failure(BusError("\(member): \(err.name.map { String(cString: $0) } ?? "") \(err.message.map { String(cString: $0) } ?? "")", r))
            }
            var s: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "s")), &s) > 0, let s else {
                return .failure(BusError("\(member): the reply is not a string"))
            }
            return .success(String(cString: s))
        }
        return try out.get()
    }

    /// Keeps a message alive past its callback (`sd_bus_message_ref`).
    func retain(_ m: OpaquePointer) -> BusMessage { BusMessage(raw: sd_bus_message_ref(m)) }
    /// Lets go of a retained message (on the queue).
    func release(_ m: BusMessage) { sd_bus_message_unref(m.raw) }

    /// Runs `body` on the queue, then processes and flushes (a send made from elsewhere).
    public func perform(_ body: @escaping @Sendable (BusConnection) -> Void) {
        queue.async { [self] in
            guard !closed else { return }
            body(self)
            pump()
        }
    }

    // MARK: Building messages

    /// Sends a method return for `call` with the appended values. On the queue.
    func reply(to call: BusMessage, _ values: [BusValue]) {
        var m: OpaquePointer?
        guard sd_bus_message_new_method_return(call.raw, &m) >= 0, let m else { return }
        defer { sd_bus_message_unref(m) }
        for v in values { _ = v.append(to: m) }
        sd_bus_send(bus, m, nil)
    }

    /// Sends an error reply (`name` such as `org.freedesktop.DBus.Error.InvalidArgs`). On the queue.
    func replyError(to call: BusMessage, _ name: String, _ message: String) {
        name.withCString { n in
            message.withCString { msg in
                var e = sd_bus_error(name: n, message: msg, _need_free: 0)
                _ = sd_bus_reply_method_error(call.raw, &e)
            }
        }
    }

    /// Emits a signal from `path`; `destination` nil broadcasts it. On the queue.
    func emitSignal(path: String, interface: String, member: String, destination: String?, _ values: [BusValue]) {
        var m: OpaquePointer?
        guard sd_bus_message_new_signal(bus, &m, path, interface, member) >= 0, let m else { return }
        defer { sd_bus_message_unref(m) }
        if let destination { sd_bus_message_set_destination(m, destination) }
        for v in values { _ = v.append(to: m) }
        sd_bus_send(bus, m, nil)
    }
}

/// A value appended to an outgoing message.
enum BusValue: Sendable {
    case string(String)
    case uint32(UInt32)
    case bool(Bool)
    case strings([String])
    /// `a{sv}` with boolean values (properties).
    case boolProperties([(String, Bool)])
    /// `v` holding a boolean.
    case variantBool(Bool)

    func append(to m: OpaquePointer) -> Int32 {
        switch self {
        case let .string(s): return s.withCString { sd_bus_message_append_basic(m, CChar(UInt8(ascii: "s")), $0) }
        case var .uint32(u): return sd_bus_message_append_basic(m, CChar(UInt8(ascii: "u")), &u)
        case let .bool(b):
            var v: Int32 = b ? 1 : 0
            return sd_bus_message_append_basic(m, CChar(UInt8(ascii: "b")), &v)
        case let .strings(list):
            var r = sd_bus_message_open_container(m, CChar(UInt8(ascii: "a")), "s")
            guard r >= 0 else { return r }
            for s in list {
                r = s.withCString { sd_bus_message_append_basic(m, CChar(UInt8(ascii: "s")), $0) }
                guard r >= 0 else { return r }
            }
            return sd_bus_message_close_container(m)
        case let .variantBool(b):
            var r = sd_bus_message_open_container(m, CChar(UInt8(ascii: "v")), "b")
            guard r >= 0 else { return r }
            r = BusValue.bool(b).append(to: m)
            guard r >= 0 else { return r }
            return sd_bus_message_close_container(m)
        case let .boolProperties(list):
            var r = sd_bus_message_open_container(m, CChar(UInt8(ascii: "a")), "{sv}")
            guard r >= 0 else { return r }
            for (k, v) in list {
                r = sd_bus_message_open_container(m, CChar(UInt8(ascii: "e")), "sv")
                if r >= 0 { r = BusValue.string(k).append(to: m) }
                if r >= 0 { r = BusValue.variantBool(v).append(to: m) }
                if r >= 0 { r = sd_bus_message_close_container(m) }
                guard r >= 0 else { return r }
            }
            return sd_bus_message_close_container(m)
        }
    }
}

extension BusConnection {
    /// The pid of the connection with unique name `sender` (`GetConnectionUnixProcessID`), or nil.
    /// Blocks on this connection's queue for one round trip; call it from another queue.
    public func pid(of sender: String) -> UInt32? {
        queue.sync {
            var m: OpaquePointer?
            guard sd_bus_message_new_method_call(bus, &m, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                 "GetConnectionUnixProcessID") >= 0, let m else { return nil }
            defer { sd_bus_message_unref(m) }
            _ = sender.withCString { sd_bus_message_append_basic(m, CChar(UInt8(ascii: "s")), $0) }
            var err = sd_bus_error()
            var reply: OpaquePointer?
            let r = sd_bus_call(bus, m, 2_000_000, &err, &reply)
            defer { sd_bus_error_free(&err); if let reply { sd_bus_message_unref(reply) } }
            guard r >= 0, let reply else { return nil }
            var pid: UInt32 = 0
            guard sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "u")), &pid) > 0 else { return nil }
            return pid
        }
    }

    /// `org.freedesktop.DBus.Monitoring.BecomeMonitor(rules, 0)`: from now on this connection only
    /// receives copies of the messages the rules match, and sends nothing.
    /// - Throws: ``BusError`` with the bus's reason (a bus that does not allow monitoring).
    public func becomeMonitor(rules: [String]) throws(BusError) {
        let r: Result<Void, BusError> = queue.sync {
            var m: OpaquePointer?
            guard sd_bus_message_new_method_call(bus, &m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                 "org.freedesktop.DBus.Monitoring", "BecomeMonitor") >= 0, let m else {
                return .failure(BusError("BecomeMonitor: cannot build the call"))
            }
            defer { sd_bus_message_unref(m) }
            _ = BusValue.strings(rules).append(to: m)
            _ = BusValue.uint32(0).append(to: m)
            var err = sd_bus_error()
            var reply: OpaquePointer?
            let rc = sd_bus_call(bus, m, 5_000_000, &err, &reply)
            defer { sd_bus_error_free(&err); if let reply { sd_bus_message_unref(reply) } }
            guard rc >= 0 else {
                return .failure(BusError("BecomeMonitor: \(err.name.map { String(cString: $0) } ?? "") \(err.message.map { String(cString: $0) } ?? "")", rc))
            }
            return .success(())
        }
        try r.get()
    }
}
