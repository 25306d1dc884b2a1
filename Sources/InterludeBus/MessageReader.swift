import CSystemdBus
#if canImport(Glibc)
import Glibc
#endif

/// A D-Bus error to send back: its name (`org.freedesktop.DBus.Error.InvalidArgs`, …) and a
/// message in plain words.
public struct BusCallError: Error, Sendable, Equatable {
    /// The D-Bus error name.
    public var name: String
    /// What was wrong.
    public var message: String
    /// Makes an error.
    public init(_ name: String, _ message: String) { self.name = name; self.message = message }

    /// `org.freedesktop.DBus.Error.InvalidArgs`: the arguments do not fit the method.
    public static func invalidArgs(_ message: String) -> BusCallError { .init("org.freedesktop.DBus.Error.InvalidArgs", message) }
    /// `org.freedesktop.DBus.Error.LimitsExceeded`: a body or hint beyond the adapter's limit.
    public static func limitsExceeded(_ message: String) -> BusCallError { .init("org.freedesktop.DBus.Error.LimitsExceeded", message) }
    /// `org.freedesktop.DBus.Error.UnknownMethod`.
    public static func unknownMethod(_ message: String) -> BusCallError { .init("org.freedesktop.DBus.Error.UnknownMethod", message) }
    /// `org.freedesktop.DBus.Error.AccessDenied`: N1 refused the app.
    public static func accessDenied(_ message: String) -> BusCallError { .init("org.freedesktop.DBus.Error.AccessDenied", message) }
    /// `org.freedesktop.DBus.Error.Failed`: anything else (a state that cannot be saved, N15).
    public static func failed(_ message: String) -> BusCallError { .init("org.freedesktop.DBus.Error.Failed", message) }
}

/// The value of one `Notify` hint (`a{sv}`), by its D-Bus type. Hints of types the spec does not
/// use here (arrays, structs such as `image-data`) are kept as `other` with their signature.
public enum BusHintValue: Sendable, Equatable {
    case string(String)
    case bool(Bool)
    case byte(UInt8)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case other(signature: String)

    /// A short type description for error messages ("string", "boolean", …).
    public var typeName: String {
        switch self {
        case .string: "string"
        case .bool: "boolean"
        case .byte: "byte"
        case .int: "integer"
        case .uint: "unsigned integer"
        case .double: "double"
        case let .other(s): "'\(s)'"
        }
    }
}

/// One `org.freedesktop.Notifications.Notify` call as the spec (1.3) defines its arguments
/// (`susssasa{sv}i`), with who sent it.
public struct BusNotifyCall: Sendable, Equatable {
    /// `app_name`: the sender's claim; may be empty.
    public var appName: String
    /// `replaces_id`: 0, or the id of the notification it replaces.
    public var replacesID: UInt32
    /// `app_icon`.
    public var icon: String
    /// `summary` (the title).
    public var summary: String
    /// `body`.
    public var body: String
    /// `actions`: pairs of action key and label, flattened as on the bus.
    public var actions: [String]
    /// `hints`.
    public var hints: [String: BusHintValue]
    /// `expire_timeout` in ms: −1 = the server decides, 0 = never.
    public var expireTimeout: Int32
    /// The sender's unique name (`:1.42`).
    public var sender: String?

    /// Makes a call (tests build them directly).
    public init(appName: String = "", replacesID: UInt32 = 0, icon: String = "", summary: String = "", body: String = "",
                actions: [String] = [], hints: [String: BusHintValue] = [:], expireTimeout: Int32 = -1, sender: String? = nil) {
        self.appName = appName; self.replacesID = replacesID; self.icon = icon; self.summary = summary; self.body = body
        self.actions = actions; self.hints = hints; self.expireTimeout = expireTimeout; self.sender = sender
    }
}

/// Reads message arguments with `sd_bus_message_read_basic` / `enter_container` (no variadic
/// calls). Every failure is a ``BusCallError`` (InvalidArgs), never a crash: sd-bus checks types
/// and UTF-8 as it reads.
enum MessageReader {
    static let s = CChar(UInt8(ascii: "s"))

    static func string(_ m: OpaquePointer, _ what: String) throws(BusCallError) -> String {
        var p: UnsafePointer<CChar>?
        let r = sd_bus_message_read_basic(m, s, &p)
        guard r > 0, let p else { throw .invalidArgs("\(what) must be a string (\(reason(r)))") }
        return String(cString: p)
    }

    static func uint32(_ m: OpaquePointer, _ what: String) throws(BusCallError) -> UInt32 {
        var v: UInt32 = 0
        let r = sd_bus_message_read_basic(m, CChar(UInt8(ascii: "u")), &v)
        guard r > 0 else { throw .invalidArgs("\(what) must be a uint32 (\(reason(r)))") }
        return v
    }

    static func int32(_ m: OpaquePointer, _ what: String) throws(BusCallError) -> Int32 {
        var v: Int32 = 0
        let r = sd_bus_message_read_basic(m, CChar(UInt8(ascii: "i")), &v)
        guard r > 0 else { throw .invalidArgs("\(what) must be an int32 (\(reason(r)))") }
        return v
    }

    static func reason(_ r: Int32) -> String { r < 0 ? String(cString: strerror(-r)) : "missing" }

    /// The arguments of `Notify` (`susssasa{sv}i`), checked against the signature first.
    /// - Parameter maxBytes: the most bytes summary, body, actions and string hints may hold
    ///   together; beyond it the call is refused with LimitsExceeded.
    static func notify(_ m: OpaquePointer, maxBytes: Int) throws(BusCallError) -> BusNotifyCall {
        let sig = sd_bus_message_get_signature(m, 1).map { String(cString: $0) } ?? ""
        guard sig == "susssasa{sv}i" else {
            throw .invalidArgs("Notify takes (susssasa{sv}i): app_name, replaces_id, app_icon, summary, body, actions, hints, expire_timeout; got (\(sig))")
        }
        var call = BusNotifyCall()
        call.appName = try string(m, "app_name")
        call.replacesID = try uint32(m, "replaces_id")
        call.icon = try string(m, "app_icon")
        call.summary = try string(m, "summary")
        call.body = try string(m, "body")
        var total = call.appName.utf8.count + call.icon.utf8.count + call.summary.utf8.count + call.body.utf8.count
        guard sd_bus_message_enter_container(m, CChar(UInt8(ascii: "a")), "s") > 0 else { throw .invalidArgs("actions must be an array of strings") }
        while true {
            var p: UnsafePointer<CChar>?
            let r = sd_bus_message_read_basic(m, s, &p)
            if r == 0 { break }
            guard r > 0, let p else { throw .invalidArgs("actions must be strings (\(reason(r)))") }
            let a = String(cString: p)
            total += a.utf8.count
            call.actions.append(a)
        }
        sd_bus_message_exit_container(m)
        guard call.actions.count % 2 == 0 else { throw .invalidArgs("actions must come in pairs of key and label") }
        guard sd_bus_message_enter_container(m, CChar(UInt8(ascii: "a")), "{sv}") > 0 else { throw .invalidArgs("hints must be a{sv}") }
        while true {
            let r = sd_bus_message_enter_container(m, CChar(UInt8(ascii: "e")), "sv")
            if r == 0 { break }
            guard r > 0 else { throw .invalidArgs("hints must be a{sv} (\(reason(r)))") }
            let key = try string(m, "a hint's key")
            let value = try variant(m, key)
            if case let .string(v) = value { total += v.utf8.count }
            total += key.utf8.count
            call.hints[key] = value
            sd_bus_message_exit_container(m)
        }
        sd_bus_message_exit_container(m)
        call.expireTimeout = try int32(m, "expire_timeout")
        guard total <= maxBytes else {
            throw .limitsExceeded("the notification holds \(total) bytes of text; at most \(maxBytes) (bus.maxNotificationBytes)")
        }
        call.sender = sd_bus_message_get_sender(m).map { String(cString: $0) }
        return call
    }

    /// One hint's variant, by its contained type.
    static func variant(_ m: OpaquePointer, _ key: String) throws(BusCallError) -> BusHintValue {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        guard sd_bus_message_peek_type(m, &type, &contents) > 0, type == CChar(UInt8(ascii: "v")), let contents else {
            throw .invalidArgs("hint \(key) must be a variant")
        }
        let sig = String(cString: contents)
        guard sd_bus_message_enter_container(m, CChar(UInt8(ascii: "v")), contents) > 0 else { throw .invalidArgs("hint \(key): bad variant") }
        defer { sd_bus_message_exit_container(m) }
        func read<T>(_ t: String, _ initial: T) throws(BusCallError) -> T {
            var v = initial
            let r = withUnsafeMutablePointer(to: &v) { sd_bus_message_read_basic(m, CChar(UInt8(ascii: Unicode.Scalar(t)!)), $0) }
            guard r > 0 else { throw .invalidArgs("hint \(key): cannot read its \(t) value (\(reason(r)))") }
            return v
        }
        switch sig {
        case "s", "o", "g":
            var p: UnsafePointer<CChar>?
            let r = sd_bus_message_read_basic(m, CChar(UInt8(ascii: Unicode.Scalar(sig)!)), &p)
            guard r > 0, let p else { throw .invalidArgs("hint \(key): not a valid string (\(reason(r)))") }
            return .string(String(cString: p))
        case "b": return .bool(try read("b", Int32(0)) != 0)
        case "y": return .byte(try read("y", UInt8(0)))
        case "n": return .int(Int64(try read("n", Int16(0))))
        case "q": return .uint(UInt64(try read("q", UInt16(0))))
        case "i": return .int(Int64(try read("i", Int32(0))))
        case "u": return .uint(UInt64(try read("u", UInt32(0))))
        case "x": return .int(try read("x", Int64(0)))
        case "t": return .uint(try read("t", UInt64(0)))
        case "d": return .double(try read("d", Double(0)))
        default:
            let r = sd_bus_message_skip(m, contents)
            guard r >= 0 else { throw .invalidArgs("hint \(key): cannot skip its value (\(reason(r)))") }
            return .other(signature: sig)
        }
    }
}
