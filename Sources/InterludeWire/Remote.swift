import Foundation
import InterludePolicy

/// Remote notifications (issue 11, REMOTE.md): the message a provider publishes to a device's
/// topic, the receipt the device publishes back, and the app's registration method.
public enum RemoteMethod {
    /// `notification.registerRemote`: the calling app registers (or unregisters) for remote
    /// notifications; the reply names the device and the topic a provider publishes to.
    public static let registerRemote = "notification.registerRemote"
}

/// `notification.registerRemote` params: `enabled` (default true).
public struct RegisterRemoteParams: WireParams, Equatable {
    public static let fields: Set<String> = ["enabled"]
    public var enabled: Bool?
    public init(enabled: Bool? = nil) { self.enabled = enabled }
}

/// The reply to `notification.registerRemote`: where a provider sends this device's
/// notifications (nil while the daemon's config names no broker).
public struct RegisterRemoteResult: Codable, Sendable, Equatable {
    public var registered: Bool
    public var device: String?
    public var topic: String?
    public init(registered: Bool, device: String?, topic: String?) { self.registered = registered; self.device = device; self.topic = topic }
}

/// The topics of one device under a prefix (`interlude/devices` by default):
/// `PREFIX/DEVICE/notifications` (the provider writes, the device reads) and
/// `PREFIX/DEVICE/receipts` (the device writes, the provider reads).
public struct RemoteTopics: Sendable, Equatable {
    public var prefix: String
    public var device: String
    public init(prefix: String, device: String) { self.prefix = prefix; self.device = device }
    public var notifications: String { "\(prefix)/\(device)/notifications" }
    public var receipts: String { "\(prefix)/\(device)/receipts" }

    /// A device id is 1…128 characters of letters, digits, `.`, `_` and `-` (a topic level and a
    /// broker username; MQTT wildcards `+`/`#` and `/` would change the topic).
    public static func deviceProblem(_ id: String) -> String? {
        guard (1...128).contains(id.utf8.count) else { return "a device id is 1…128 characters" }
        let ok = id.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0) }
        return ok ? nil : "a device id has only letters, digits, '.', '_' and '-'"
    }

    /// Why `prefix` cannot begin the topics (a `remote.topicPrefix`), or nil: MQTT's wildcards
    /// `+` and `#` and NUL may not be in a topic one publishes to, and an empty level (a leading,
    /// trailing or doubled `/`) makes a topic nobody means. (The daemon started with such a prefix
    /// and only logged that its subscription failed, receiving nothing.)
    public static func prefixProblem(_ prefix: String) -> String? {
        if prefix.isEmpty { return "a topic prefix must not be empty" }
        if prefix.contains(where: { $0 == "+" || $0 == "#" || $0 == "\u{0}" }) { return "a topic prefix must not hold an MQTT wildcard (+, #) or NUL" }
        // MQTT 3.1.1 §1.5.3: control characters and non-characters are refused by brokers
        // (mosquitto: "Malformed UTF-8"; the daemon started and received nothing).
        if prefix.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.properties.isNoncharacterCodePoint }) {
            return "a topic prefix must not hold control characters or Unicode non-characters"
        }
        // §4.7.2: topics starting with `$` are the broker's own ($SYS); clients' publishes there are dropped.
        if prefix.hasPrefix("$") { return "a topic prefix must not start with '$' (the broker's own topics)" }
        if prefix.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
            return "a topic prefix must not have an empty level (a leading, trailing or doubled '/')"
        }
        if prefix.utf8.count > 1024 { return "a topic prefix must be at most 1024 bytes" }
        return nil
    }
}

/// A remote notification message, version 1 (REMOTE.md): one JSON object,
/// `{"v": 1, "id": "MESSAGE-ID", "app": "APP", "title": …}` with every field of
/// `notification.add` beside `v`, `id` and `app`. `id` (1…128 bytes) is the provider's message id:
/// the device delivers each id once. `identifier` defaults to `id`.
public struct RemoteMessage: Sendable, Equatable {
    /// The format version this build reads and writes.
    public static let version = 1
    /// The largest message by default (bytes); `remote.maxMessageBytes` in the config.
    public static let defaultMaxBytes = 16384
    /// The keys a version 1 message may have.
    public static let fields: Set<String> = AddNotificationParams.fields.union(["v", "id", "app"])

    public var id: String
    public var app: String
    /// The notification, exactly as `notification.add` params.
    public var notification: AddNotificationParams

    public init(id: String, app: String, notification: AddNotificationParams) {
        self.id = id; self.app = app; self.notification = notification
    }

    /// The message as JSON text (what `interlude push` publishes).
    public func encoded() throws -> [UInt8] {
        guard case var .object(o) = try JSONValue(encoding: notification) else { throw WireError(.internalError, "params do not encode as an object") }
        o["v"] = .number(Double(Self.version))
        o["id"] = .string(id)
        o["app"] = .string(app)
        return Array(try WireCoding.encode(JSONValue.object(o)))
    }

    /// The most `remote.maxMessageBytes` may be (ConfigSchema's range), 256 KiB: what
    /// `interlude push` checks its messages against, and how much of a message too large for the
    /// device's limit is still read for its receipt's id.
    public static let largestMaxBytes = 262144

    /// The id a device's receipt names for `bytes`: the message's id, or for a malformed message
    /// what could be read of it (nil when nothing, e.g. an id given twice or not a string).
    /// `interlude push --raw` matches receipts with it.
    public static func receiptID(of bytes: [UInt8]) -> String? {
        do { return try parse(bytes, maxBytes: largestMaxBytes).id } catch { return error.id }
    }

    /// Parses a message.
    /// - Throws: ``RemoteMessageError`` with code `tooLarge` (over `maxBytes`, checked before
    ///   the fields are), `badRequest` (not UTF-8 JSON, not an object, nesting beyond
    ///   ``JSONDepth``, `v` missing or not 1, `id` or `app` missing or bad, a field of the wrong
    ///   type or range) or `unknownField`. The error carries `id` and `app` when they could be
    ///   read, for the receipt: for a message too large or not UTF-8 as ``receiptFields(_:)``
    ///   reads them.
    public static func parse(_ bytes: [UInt8], maxBytes: Int = defaultMaxBytes) throws(RemoteMessageError) -> RemoteMessage {
        guard bytes.count <= maxBytes else {
            let (id, app) = receiptFields(bytes)
            throw RemoteMessageError(WireError(.tooLarge, "the message has \(bytes.count) bytes; at most \(maxBytes)"), id: id, app: app)
        }
        var params: [String: JSONValue]
        do { params = try WireRequest.jsonObject(bytes, named: "a message") } catch {
            let (id, app) = receiptFields(bytes)
            throw RemoteMessageError(error, id: id, app: app)
        }
        let id = params.removeValue(forKey: "id")
        let app = params.removeValue(forKey: "app")
        let v = params.removeValue(forKey: "v")
        let idText = id?.stringValue
        let appText = app?.stringValue
        func fail(_ code: WireErrorCode, _ message: String) -> RemoteMessageError {
            RemoteMessageError(WireError(code, message), id: idText, app: appText)
        }
        guard case let .number(n)? = v else { throw fail(.badRequest, "\"v\" (the format version, 1) is missing or not a number") }
        guard n == Double(version) else { throw fail(.badRequest, "format version \(plainNumber(n)) is not supported (this device reads version \(version))") }
        guard let idText, (1...128).contains(idText.utf8.count) else {
            throw fail(.badRequest, "\"id\" must be a string of 1…128 bytes (the provider's message id)")
        }
        guard let appText, AppIdentifier.problem(appText) == nil else {
            throw fail(.badRequest, "\"app\" must be an app id (1…255 bytes of UTF-8 without spaces or control characters)")
        }
        var inner = WireRequest(id: .number(0), method: "remote message", params: params)
        if inner.params["identifier"] == nil { inner.params["identifier"] = .string(idText) }
        do {
            return RemoteMessage(id: idText, app: appText, notification: try inner.decodeParams(AddNotificationParams.self))
        } catch {
            var e = error
            if e.code == .unknownField, let extra = Set(params.keys).subtracting(fields).sorted().first {
                e.message = "a version \(version) message has no field \"\(extra)\""
            }
            throw RemoteMessageError(e, id: idText, app: appText)
        }
    }
}

extension RemoteMessage {
    /// The `id` and `app` of a message that cannot be read as a whole (too large, invalid UTF-8,
    /// nesting too deep or a value no parser takes somewhere else in it), for its receipt, so that the provider can match
    /// the receipt: read when the message is a JSON object of at most 256 KiB nested at most 128
    /// levels, its invalid UTF-8 taken as U+FFFD. A
    /// value that holds U+FFFD where the message had invalid bytes, is not a string, or is out of
    /// the limits `parse` checks is not read (nil).
    static func receiptFields(_ bytes: [UInt8]) -> (id: String?, app: String?) {
        // Deeper than a message may be (a message refused for its nesting still has its id read),
        // within what the decoder takes safely (it traps near 512 levels).
        guard bytes.count <= largestMaxBytes, (try? JSONDepth.check(bytes, limit: 4 * JSONDepth.maximum)) != nil else { return (nil, nil) }
        let valid = String(validating: bytes, as: UTF8.self) != nil
        let text = String(decoding: bytes, as: UTF8.self)
        // A message the parser refuses for a value elsewhere in it (half a surrogate pair in the
        // body, 1e400) is still well-formed: its top-level members are read one by one.
        let o: [String: JSONValue]
        if let whole = (try? JSONValue.parse(Data(text.utf8)))?.objectValue { o = whole } else {
            var read: [String: JSONValue] = [:]
            let utf8 = Array(text.utf8)
            for m in JSONSyntax.topLevelMembers(of: utf8) { read[m.key] = try? JSONValue.parse(Data(utf8[m.value])) }
            guard !read.isEmpty else { return (nil, nil) }
            o = read
        }
        func readable(_ s: String) -> Bool { valid || !s.unicodeScalars.contains("\u{FFFD}") }
        // An `id` or `app` given twice is ambiguous: not named.
        let twice = JSONDuplicateKeys.topLevelKeysGivenTwice(in: Array(text.utf8))
        let id = o["id"]?.stringValue.flatMap { (1...128).contains($0.utf8.count) && readable($0) && !twice.contains("id") ? $0 : nil }
        let app = o["app"]?.stringValue.flatMap { AppIdentifier.problem($0) == nil && readable($0) && !twice.contains("app") ? $0 : nil }
        return (id, app)
    }
}

/// Why a message cannot be delivered, with what could be read of it.
public struct RemoteMessageError: Error, Sendable, Equatable {
    public var error: WireError
    public var id: String?
    public var app: String?
    public init(_ error: WireError, id: String? = nil, app: String? = nil) { self.error = error; self.id = id; self.app = app }
}

/// A receipt (REMOTE.md), published by the device to `PREFIX/DEVICE/receipts` for each message:
/// what happened and the rules that decided it (N16).
public struct RemoteReceipt: Codable, Sendable, Equatable {
    /// What happened to a message.
    public enum Status: String, Codable, Sendable {
        /// In the center with its sound and banner (also `downgraded`: at a lower level, N3/N4).
        case delivered, downgraded
        /// In the center, no sound and no banner (focus N7, passive N5, provisional N1).
        case silenced
        /// Waiting: for the scheduled summary (N9), a trigger (N8) or a coalescing window (N11).
        case held
        /// Refused by the rules (N1, N2, N6, …): nothing delivered.
        case rejected
        /// Not a valid message (bad JSON, fields, version, or too large): acknowledged, never delivered.
        case malformed
        /// A message id this device has already decided (the broker delivered it again): nothing
        /// delivered again; `decision` is the first one's, if still known.
        case duplicate
        /// The device could not save the decision (N15): the message is not acknowledged and comes again.
        case failed
    }
    public var v: Int
    /// The message id (nil if the message had none that could be read).
    public var id: String?
    public var device: String
    public var app: String?
    /// The notification identifier (default: the message id).
    public var identifier: String?
    public var status: Status
    /// The rule ids of the decision (empty when malformed).
    public var rules: [String]
    /// The decision, as `notification.add` returns it.
    public var decision: NotificationDecision?
    /// For `malformed` and `rejected`: the stable code and the reason.
    public var error: WireError?
    /// When the device decided (seconds since 1970).
    public var time: Double

    public init(id: String?, device: String, app: String?, identifier: String?, status: Status, rules: [String],
                decision: NotificationDecision?, error: WireError?, time: Double) {
        v = RemoteMessage.version
        self.id = id; self.device = device; self.app = app; self.identifier = identifier; self.status = status
        self.rules = rules; self.decision = decision; self.error = error; self.time = time
    }

    /// The status a decision's outcome reads as.
    public static func status(of outcome: NotificationDecision.Outcome) -> Status {
        switch outcome {
        case .delivered: .delivered
        case .downgraded: .downgraded
        case .silenced: .silenced
        case .held: .held
        case .rejected: .rejected
        }
    }

    /// One line of JSON (sorted keys).
    public func encoded() -> [UInt8] {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? e.encode(self)) ?? Data("{}".utf8))
    }
}
