#if canImport(Glibc)
import Glibc
#endif
import CMosquitto
import Foundation
import Synchronization

/// A broker address: `mqtt://HOST[:PORT]` (plain TCP, port 1883) or `mqtts://HOST[:PORT]` (TLS,
/// port 8883). Credentials are never part of the URL (a password on a command line is visible to
/// every user in `ps`): they come from a password file.
public struct MQTTBrokerURL: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var tls: Bool

    /// Parses a broker URL.
    /// - Throws: ``MQTTError`` `badURL` for another scheme, user info in the URL, an empty host or
    ///   a port outside 1…65535.
    public init(_ text: String) throws(MQTTError) {
        let scheme: String
        let rest: Substring
        if text.hasPrefix("mqtt://") { scheme = "mqtt"; rest = text.dropFirst(7) }
        else if text.hasPrefix("mqtts://") { scheme = "mqtts"; rest = text.dropFirst(8) }
        else { throw MQTTError(.badURL, "a broker URL is mqtt://HOST[:PORT] or mqtts://HOST[:PORT], not \(text)") }
        let hostPort = rest.hasSuffix("/") ? rest.dropLast() : rest
        guard !hostPort.contains("@") else {
            throw MQTTError(.badURL, "a broker URL carries no user or password (use a password file): \(text)")
        }
        guard !hostPort.contains("/") else { throw MQTTError(.badURL, "a broker URL has no path: \(text)") }
        tls = scheme == "mqtts"
        var h = String(hostPort)
        var p = tls ? 8883 : 1883
        if let colon = h.lastIndex(of: ":"), !h.hasSuffix("]") {
            guard let n = Int(h[h.index(after: colon)...]), (1...65535).contains(n) else {
                throw MQTTError(.badURL, "the port of \(text) must be 1…65535")
            }
            p = n
            h = String(h[..<colon])
        }
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        guard !h.isEmpty else { throw MQTTError(.badURL, "the broker URL \(text) has no host") }
        // A host name (RFC 1123: letters, digits, hyphens, dots; an underscore is seen in the
        // wild) or an IP address (IPv6 between brackets): anything else (a space, a control
        // character) was looked up for 10 s and failed as "Lookup error".
        guard h.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-._:%".unicodeScalars.contains($0)) }) else {
            throw MQTTError(.badURL, "the host of a broker URL is a name or an IP address (letters, digits, '-', '.'), not \(h.debugDescription)")
        }
        host = h
        port = p
    }

    /// Makes a URL from its parts.
    public init(host: String, port: Int, tls: Bool) { self.host = host; self.port = port; self.tls = tls }

    public var description: String { "\(tls ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}

/// An error of the MQTT adapter, with a stable code.
public struct MQTTError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The broker URL cannot be used.
        case badURL
        /// A credentials or CA file cannot be read.
        case badCredentials
        /// libmosquitto refused a call (the message has its words).
        case mosquittoFailed
        /// No connection (yet, or any more).
        case notConnected
        /// The broker refused the connection (CONNACK code in the message).
        case connectionRefused
        /// Nothing came in time.
        case timedOut
        /// The TLS handshake failed: the broker's certificate is not signed by the CA file, names
        /// another host, or the broker speaks no TLS (the message has OpenSSL's words).
        case tlsFailed
    }
    public var code: Code
    public var message: String
    public init(_ code: Code, _ message: String) { self.code = code; self.message = message }
    public var description: String { "\(message) [\(code.rawValue)]" }
}

/// A message as the broker delivered it.
public struct MQTTMessage: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: Int32
    public var retain: Bool
    /// The MQTT packet id (not stable across redeliveries: dedupe on an id inside the payload).
    public var mid: Int32
}

/// The acknowledgement of one QoS 1 message handed to a deferred handler
/// (``MQTTClient/start(onDeferredMessage:onConnect:)``): until ``acknowledge()`` is called, no
/// PUBACK, neither this message's nor a later one's, leaves the client. Call it once the message is
/// persisted (or decided not to need it); calling it again does nothing.
public final class MQTTDelivery: Sendable {
    private let done = Mutex(false)
    private let client: MQTTClient
    init(_ client: MQTTClient) { self.client = client }
    public func acknowledge() {
        guard done.withLock({ d in defer { d = true }; return !d }) else { return }
        client.acknowledged()
    }
}

/// How to connect.
public struct MQTTOptions: Sendable {
    public var broker: MQTTBrokerURL
    /// Other brokers to try, in order, when an attempt to connect to the current one fails (the
    /// other nodes of a cluster); the client stays on the one it reaches until that one fails.
    /// Same scheme as `broker` (one TLS setting serves all).
    public var fallbackBrokers: [MQTTBrokerURL] = []
    /// `broker`, then `fallbackBrokers`.
    public var brokers: [MQTTBrokerURL] { [broker] + fallbackBrokers }
    /// The client id: the device id for a device (one connection per id: two clients with one id
    /// take the connection from each other).
    public var clientID: String
    /// false: a persistent session, so QoS 1 messages wait at the broker while the client is away.
    public var cleanSession: Bool
    public var username: String?
    public var password: String?
    /// PEM file of the CA that signed the broker's certificate (for `mqtts://`); nil = the system's CAs.
    public var caFile: String?
    /// Keepalive interval (s).
    public var keepaliveSeconds: Int32
    /// At most this many messages are handed to the handler between two flushes of their PUBACKs
    /// (≥ 1): the network thread stops reading when this many were handed out since the last
    /// flush, waits until all are acknowledged, writes their PUBACKs, then reads on. So at most
    /// this many (plus the few one read can bring, see ``MQTTClient/maxQueuedReplies``) are ever
    /// saved and not yet acknowledged to the broker — what a crash can have the broker deliver
    /// again. Keep it well under the receiver's dedupe window. A backlog the broker sends all at
    /// once (mosquitto does after a reconnect) is read and acknowledged in rounds of this size.
    public var maxUnacknowledged = 64
    public init(broker: MQTTBrokerURL, clientID: String, cleanSession: Bool, username: String? = nil, password: String? = nil,
                caFile: String? = nil, keepaliveSeconds: Int32 = 30) {
        self.broker = broker; self.clientID = clientID; self.cleanSession = cleanSession
        self.username = username; self.password = password; self.caFile = caFile; self.keepaliveSeconds = keepaliveSeconds
    }

    /// Reads a password file: its first line, without the line end.
    /// - Throws: ``MQTTError`` `badCredentials` when it cannot be read or is empty.
    public static func readPasswordFile(_ path: String) throws(MQTTError) -> String {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw MQTTError(.badCredentials, "cannot read the password file \(path)")
        }
        // "\r\n" is one Character in Swift: split on every kind of line end, not on "\n".
        let password = text.split(maxSplits: 1, omittingEmptySubsequences: false, whereSeparator: \.isNewline).first.map(String.init) ?? ""
        guard !password.isEmpty else { throw MQTTError(.badCredentials, "the password file \(path) is empty") }
        return password
    }
}

/// One libmosquitto client on its own network thread (``start(onMessage:onConnect:)``), reconnecting
/// with backoff by itself, also after the errors that end libmosquitto's own loop (a failed TLS
/// handshake, a protocol error): those are logged once with a stable code (``lastError``) and
/// retried, never a dead connection without a word.
///
/// Delivery contract for QoS 1 (the reason this adapter exists): libmosquitto has no manual
/// acknowledgement, but in threaded mode the PUBACK it queues for a message is only written by the
/// network thread, and this client's network thread writes nothing while a message handed to the
/// handler is not acknowledged. ``start(onMessage:)``'s handler runs synchronously and is
/// acknowledged when it returns: whatever it persists before returning is persisted before the
/// broker hears the PUBACK. ``start(onDeferredMessage:onConnect:)``'s handler acknowledges later
/// (``MQTTDelivery``), so several messages can be persisted together. Either way, if the process
/// dies before the acknowledgement, the broker delivers the message again (with `cleanSession`
/// false): the handler must be idempotent (dedupe by an id in the payload). It must not call
/// ``stop()``.
///
/// The C callbacks are file-scope functions of this library, never closures in main-actor code
/// (DESIGN.md: the Swift 6 callback trap, SIGILL).
public final class MQTTClient: @unchecked Sendable {
    public let options: MQTTOptions
    let mosq: OpaquePointer
    let state = Mutex(ClientState())
    let changed = NSCondition()
    var onMessage: (@Sendable (MQTTMessage, MQTTDelivery) -> Void)?
    var onConnect: (@Sendable () -> Void)?
    /// Log lines (connection changes), for the daemon's stderr.
    let log: @Sendable (String) -> Void
    var started = false
    /// Signalled when the network thread ends (after ``stop()``).
    let threadEnded = DispatchSemaphore(value: 0)

    struct ClientState {
        var connected = false
        var lastConnack: Int32?
        var connects = 0
        var published: Set<Int32> = []
        var subscribed: [Int32: [Int32]] = [:]
        /// ``stop()`` was called: the network thread ends.
        var stopping = false
        /// The last error line libmosquitto logged (OpenSSL's reason of a failed handshake).
        var libraryError: String?
        /// Why the last connection attempt failed (nil after a connection).
        var lastError: MQTTError?
        /// The last failure logged (the same one is not logged on every retry).
        var loggedFailure: String?
        /// Messages handed to the handler and not acknowledged yet: while any is, nothing is
        /// written to the broker (the PUBACKs wait in libmosquitto's queue).
        var unacknowledged = 0
        /// Messages handed to the handler since libmosquitto's out queue was last empty with none
        /// unacknowledged (every PUBACK so far written): reading stops at
        /// ``MQTTOptions/maxUnacknowledged``.
        var handedOutSinceFlush = 0
        /// Replies (``MQTTClient/publishQueued(_:_:)``) not yet given to libmosquitto, oldest
        /// first from `queuedRepliesHead` (a backlog's receipts can be thousands).
        var queuedReplies: [(topic: String, payload: [UInt8], onAcknowledged: (@Sendable () -> Void)?)] = []
        var queuedRepliesHead = 0
        /// Packet ids of queued replies given to libmosquitto and not yet acknowledged by the broker.
        var repliesInFlight: Set<Int32> = []
        /// What to call when the broker acknowledges a reply, by packet id. Kept across a
        /// reconnect (libmosquitto sends the reply again with the same id); a reply never
        /// acknowledged keeps its entry for the life of the client.
        var replyAcknowledgements = PacketCallbacks()
        /// Which of ``MQTTOptions/brokers`` the client connects (or tries to connect) to.
        var brokerIndex = 0
    }

    /// The broker the client is connected to, or trying to connect to now.
    public var currentBroker: MQTTBrokerURL { options.brokers[state.withLock { $0.brokerIndex }] }
    /// A pipe that wakes the network thread's poll: an acknowledgement, a publish, a stop.
    let wakeRead: Int32
    let wakeWrite: Int32

    private static let libraryInit: Void = { mosquitto_lib_init() }()

    /// Makes a client; nothing is sent until ``start(onMessage:onConnect:)``.
    /// - Throws: ``MQTTError`` `mosquittoFailed` (out of memory, bad id), `badCredentials` (a CA
    ///   file that cannot be read).
    public init(_ options: MQTTOptions, log: @escaping @Sendable (String) -> Void = { _ in }) throws(MQTTError) {
        _ = Self.libraryInit
        self.options = options
        self.log = log
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw MQTTError(.mosquittoFailed, "pipe: \(String(cString: strerror(errno)))") }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        guard let m = mosquitto_new(options.clientID, options.cleanSession, nil) else {
            throw MQTTError(.mosquittoFailed, "mosquitto_new failed for client id \(options.clientID): \(String(cString: strerror(errno)))")
        }
        mosq = m
        mosquitto_user_data_set(m, Unmanaged.passUnretained(self).toOpaque())
        _ = mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, Int32(MQTT_PROTOCOL_V311))
        // Small packets go out at once: with Nagle's algorithm a receipt written right after a
        // PUBACK waited for the broker's delayed ACK (about 40 ms on every push).
        _ = mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1)
        if let u = options.username {
            try check(mosquitto_username_pw_set(m, u, options.password), "mosquitto_username_pw_set")
        }
        if options.broker.tls {
            if let ca = options.caFile, !FileManager.default.isReadableFile(atPath: ca) {
                throw MQTTError(.badCredentials, "cannot read the CA file \(ca)")
            }
            if let ca = options.caFile {
                try check(mosquitto_tls_set(m, ca, nil, nil, nil, nil), "mosquitto_tls_set")
            } else {
                try check(mosquitto_tls_set(m, nil, "/etc/ssl/certs", nil, nil, nil), "mosquitto_tls_set")
            }
        }
        mosquitto_connect_callback_set(m, mqttOnConnect)
        mosquitto_disconnect_callback_set(m, mqttOnDisconnect)
        mosquitto_message_callback_set(m, mqttOnMessage)
        mosquitto_publish_callback_set(m, mqttOnPublish)
        mosquitto_subscribe_callback_set(m, mqttOnSubscribe)
        mosquitto_log_callback_set(m, mqttOnLog)
        // Our own network thread (below) instead of mosquitto_loop_start: libmosquitto's thread
        // returns for good after a "fatal" error such as a failed TLS handshake. Threaded mode
        // still defers every write (the PUBACK too) to the network thread, after the handler.
        _ = mosquitto_threaded_set(m, true)
    }

    deinit {
        stop()
        mosquitto_destroy(mosq)
        close(wakeRead)
        close(wakeWrite)
    }

    func check(_ rc: Int32, _ what: String) throws(MQTTError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError(.mosquittoFailed, "\(what): \(String(cString: mosquitto_strerror(rc)))") }
    }

    /// Connects (asynchronously: a broker that is not up yet, or whose TLS handshake fails, is
    /// retried with backoff, 1…30 s, each new failure logged once with its code) and starts the
    /// network thread.
    /// - Parameters:
    ///   - onMessage: called on the network thread for each message, in order; the message is
    ///     acknowledged (QoS 1) after it returns (see the type's doc).
    ///   - onConnect: called on the network thread after each accepted connection (subscribe here).
    /// - Throws: ``MQTTError`` `mosquittoFailed` when the thread cannot start.
    public func start(onMessage: (@Sendable (MQTTMessage) -> Void)? = nil, onConnect: (@Sendable () -> Void)? = nil) throws(MQTTError) {
        var deferred: (@Sendable (MQTTMessage, MQTTDelivery) -> Void)?
        if let onMessage {
            deferred = { m, delivery in
                onMessage(m)
                delivery.acknowledge()
            }
        }
        try start(onDeferredMessage: deferred, onConnect: onConnect)
    }

    /// As ``start(onMessage:onConnect:)``, with the acknowledgement in the handler's hands: the
    /// handler is called on the network thread for each message, in order, and should return at
    /// once; the network thread goes on reading (so several messages can be saved in one commit),
    /// but writes nothing to the broker — no PUBACK, no receipt — until every message handed out
    /// so far was acknowledged (``MQTTDelivery/acknowledge()``). So a message's PUBACK still
    /// leaves only after it was persisted, and a crash before that gets it delivered again.
    /// How many messages can wait is the broker's in-flight window (mosquitto's
    /// `max_inflight_messages`, RabbitMQ's MQTT prefetch).
    /// - Throws: ``MQTTError`` `mosquittoFailed` when the thread cannot start.
    public func start(onDeferredMessage: (@Sendable (MQTTMessage, MQTTDelivery) -> Void)?, onConnect: (@Sendable () -> Void)? = nil) throws(MQTTError) {
        self.onMessage = onDeferredMessage
        self.onConnect = onConnect
        let rc = mosquitto_connect_async(mosq, options.broker.host, Int32(options.broker.port), options.keepaliveSeconds)
        if rc != MOSQ_ERR_SUCCESS.rawValue { failed(rc) }
        let connected = rc == MOSQ_ERR_SUCCESS.rawValue
        let thread = Thread { [self] in self.networkLoop(connecting: connected) }
        thread.name = "mqtt \(options.clientID)"
        thread.start()
        started = true
    }

    /// The network thread: `mosquitto_loop` (at most 1 s per call, so ``stop()`` is seen within a
    /// second) until the connection ends or an attempt fails, then the backoff (1 s, doubling to
    /// 30 s while attempts fail; 1 s after a connection that was up) and a reconnect. With
    /// ``MQTTOptions/fallbackBrokers``, a failed attempt moves on to the next broker in the list
    /// (after the first round, the backoff doubles once per round, not per broker); a connection
    /// that was up and is lost is tried again on the same broker first. Unlike
    /// libmosquitto's own loop it also goes on after a "fatal" error (a failed TLS handshake, a
    /// protocol error): the broker or its certificate may be fixed, and the daemon must not
    /// silently stop receiving.
    func networkLoop(connecting: Bool) {
        var delay = 1.0
        var attempting = connecting  // a socket is open (the connection is being made or is up)
        var attemptFailed = !connecting  // start's own attempt failed
        var failedInRound = attemptFailed ? 1 : 0  // failed attempts since a connection, for the backoff
        var connectsBefore = 0
        let brokers = options.brokers
        while !state.withLock({ $0.stopping }) {
            if attempting {
                let rc = service()
                if rc == MOSQ_ERR_SUCCESS.rawValue { continue }
                if state.withLock({ $0.stopping }) { break }
                attempting = false
                if state.withLock({ $0.connects }) > connectsBefore {
                    delay = 1  // it was up: the disconnect callback logged the loss
                    attemptFailed = false
                    failedInRound = 0
                } else {
                    failed(rc)
                    attemptFailed = true
                    failedInRound += 1
                }
            }
            let until = Date().addingTimeInterval(delay)
            while Date() < until, !state.withLock({ $0.stopping }) { Thread.sleep(forTimeInterval: 0.05) }
            if state.withLock({ $0.stopping }) { break }
            // One broker: the backoff doubles on every attempt. Several: once per round of them.
            if brokers.count == 1 || failedInRound % brokers.count == 0 { delay = min(delay * 2, 30) }
            connectsBefore = state.withLock { $0.connects }
            let rc: Int32
            if attemptFailed, brokers.count > 1 {
                let next = state.withLock { s -> MQTTBrokerURL in
                    s.brokerIndex = (s.brokerIndex + 1) % brokers.count
                    return brokers[s.brokerIndex]
                }
                log("trying the next broker, \(next)")
                rc = mosquitto_connect_async(mosq, next.host, Int32(next.port), options.keepaliveSeconds)
            } else {
                rc = mosquitto_reconnect(mosq)
            }
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                attempting = true
                attemptFailed = false
            } else {
                failed(rc)
                attemptFailed = true
                failedInRound += 1
            }
        }
        // Stopped: what may go out (the DISCONNECT, receipts) goes out, unless a message still
        // waits for its acknowledgement (then its PUBACK must not).
        if attempting, state.withLock({ $0.unacknowledged == 0 }) {
            releaseQueuedReplies(all: true)
            for _ in 0..<20 {
                guard mosquitto_want_write(mosq) else { break }
                if mosquitto_loop_write(mosq, 1) != MOSQ_ERR_SUCCESS.rawValue { break }
            }
        }
        threadEnded.signal()
    }

    /// At most this many queued replies (``publishQueued(_:_:)``) are in libmosquitto at once.
    /// libmosquitto 2.0's `mosquitto_loop_read` reads as many packets per call as the client has
    /// QoS 1 messages of its own unfinished, and the broker's PUBACKs for our replies come behind
    /// the backlog it is sending; unbounded, a backlog's receipts made every read take the whole
    /// backlog, past ``MQTTOptions/maxUnacknowledged``.
    public static let maxQueuedReplies = 8

    /// One turn of the network thread (libmosquitto's external-loop API): waits up to 1 s for the
    /// socket or the wake pipe; reads what came (the handlers run) unless
    /// ``MQTTOptions/maxUnacknowledged`` messages were handed out since the last flush; writes
    /// what is queued only while no message waits for its acknowledgement; gives libmosquitto the
    /// next queued replies; and keeps the connection alive. Returns
    /// libmosquitto's error when the connection ended.
    func service() -> Int32 {
        let sock = mosquitto_socket(mosq)
        guard sock >= 0 else { return Int32(MOSQ_ERR_NO_CONN.rawValue) }
        releaseQueuedReplies()
        let (mayRead, mayWrite) = state.withLock { ($0.handedOutSinceFlush < options.maxUnacknowledged, $0.unacknowledged == 0) }
        var fds = [pollfd(fd: sock, events: (mayRead ? Int16(POLLIN) : 0) | (mayWrite && mosquitto_want_write(mosq) ? Int16(POLLOUT) : 0), revents: 0),
                   pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        let n = poll(&fds, 2, 1000)
        if n < 0, errno != EINTR { return Int32(MOSQ_ERR_ERRNO.rawValue) }
        if fds[1].revents != 0 {
            var sink = [UInt8](repeating: 0, count: 64)
            while read(wakeRead, &sink, sink.count) > 0 {}
        }
        if fds[0].revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
            let rc = mosquitto_loop_read(mosq, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        if state.withLock({ $0.unacknowledged == 0 }) {
            // Every message handed out is acknowledged, so every PUBACK queued is one to send
            // (libmosquitto queues a message's PUBACK before it calls the handler).
            if mosquitto_want_write(mosq) {
                let rc = mosquitto_loop_write(mosq, 1)
                if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
            }
            // All written (none left for POLLOUT): reading may go on. Checked on this thread,
            // where the handlers run, so no message was handed out in between.
            if !mosquitto_want_write(mosq) { state.withLock { $0.handedOutSinceFlush = 0 } }
        }
        return mosquitto_loop_misc(mosq)
    }

    /// Gives libmosquitto queued replies while fewer than ``maxQueuedReplies`` are in flight (on
    /// the network thread, so a reply's PUBACK, read on this thread too, cannot come before its
    /// id is recorded).
    /// - Parameter all: every queued reply, whatever is in flight (the client stops: nothing is
    ///   read any more).
    func releaseQueuedReplies(all: Bool = false) {
        while true {
            let next = state.withLock { s -> (topic: String, payload: [UInt8], onAcknowledged: (@Sendable () -> Void)?)? in
                guard all || s.repliesInFlight.count < Self.maxQueuedReplies, s.queuedRepliesHead < s.queuedReplies.count else { return nil }
                defer {
                    s.queuedRepliesHead += 1
                    if s.queuedRepliesHead == s.queuedReplies.count {
                        s.queuedReplies.removeAll(keepingCapacity: s.queuedReplies.count <= 1024)
                        s.queuedRepliesHead = 0
                    } else if s.queuedRepliesHead >= 1024, s.queuedRepliesHead * 2 >= s.queuedReplies.count {
                        s.queuedReplies.removeFirst(s.queuedRepliesHead)
                        s.queuedRepliesHead = 0
                    }
                }
                return s.queuedReplies[s.queuedRepliesHead]
            }
            guard let next else { return }
            var mid: Int32 = 0
            let rc = next.payload.withUnsafeBytes { raw in
                mosquitto_publish(mosq, &mid, next.topic, Int32(raw.count), raw.baseAddress, 1, false)
            }
            // NO_CONN: libmosquitto keeps it and sends it after the reconnect.
            if rc == MOSQ_ERR_SUCCESS.rawValue || rc == MOSQ_ERR_NO_CONN.rawValue {
                state.withLock { s in
                    s.repliesInFlight.insert(mid)
                    if let done = next.onAcknowledged { s.replyAcknowledgements.add(mid, done) }
                }
            } else {
                log("cannot publish to \(next.topic): \(String(cString: mosquitto_strerror(rc)))")
            }
        }
    }

    /// Wakes the network thread (from any thread).
    func wake() {
        var b: UInt8 = 1
        _ = write(wakeWrite, &b, 1)
    }

    /// One handed-out message was acknowledged (``MQTTDelivery``).
    func acknowledged() {
        let zero = state.withLock { s -> Bool in s.unacknowledged -= 1; return s.unacknowledged == 0 }
        if zero { wake() }
    }

    /// A connection attempt that failed with libmosquitto's `rc`: remembered as ``lastError``, and
    /// logged unless it is the failure logged last.
    func failed(_ rc: Int32) {
        let error = state.withLock { s -> MQTTError in
            let library = s.libraryError.map { " (\($0))" } ?? ""
            s.libraryError = nil
            let words = rc == MOSQ_ERR_ERRNO.rawValue ? String(cString: strerror(errno)) : String(cString: mosquitto_strerror(rc))
            let code: MQTTError.Code = rc == MOSQ_ERR_TLS.rawValue || rc == MOSQ_ERR_TLS_HANDSHAKE.rawValue ? .tlsFailed
                : rc == MOSQ_ERR_CONN_REFUSED.rawValue || rc == MOSQ_ERR_AUTH.rawValue ? .connectionRefused : .notConnected
            let e = MQTTError(code, "cannot connect to \(options.brokers[s.brokerIndex]): \(words)\(library)")
            s.lastError = e
            return e
        }
        let fresh = state.withLock { s -> Bool in defer { s.loggedFailure = error.description }; return s.loggedFailure != error.description }
        if fresh { log("\(error); retrying") }
        signal()
    }

    /// Why the last connection attempt failed (nil once connected).
    public var lastError: MQTTError? { state.withLock { $0.lastError } }

    /// Waits until connected (CONNACK accepted).
    /// - Throws: ``MQTTError`` `connectionRefused` with the broker's reason, or `timedOut`.
    public func waitUntilConnected(timeout: Double) throws(MQTTError) {
        let deadline = Date(timeIntervalSinceNow: timeout)
        changed.lock()
        defer { changed.unlock() }
        while true {
            let s = state.withLock { ($0.connected, $0.lastConnack, $0.lastError) }
            if s.0 { return }
            if let code = s.1, code != 0 {
                throw MQTTError(.connectionRefused, "the broker \(currentBroker) refused the connection: \(String(cString: mosquitto_connack_string(code)))")
            }
            if let e = s.2, e.code == .tlsFailed { throw e }
            if !changed.wait(until: deadline) {
                if let e = s.2 { throw MQTTError(.timedOut, "no connection to \(currentBroker) within \(timeout) s (\(e.message))") }
                throw MQTTError(.timedOut, "no connection to \(currentBroker) within \(timeout) s")
            }
        }
    }

    /// Whether a connection is up now.
    public var isConnected: Bool { state.withLock { $0.connected } }

    /// Subscribes; returns the packet id (see ``waitForSubscription(_:timeout:)``).
    /// - Throws: ``MQTTError`` `notConnected` or `mosquittoFailed`.
    @discardableResult
    public func subscribe(_ topic: String, qos: Int32 = 1) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let rc = mosquitto_subscribe(mosq, &mid, topic, qos)
        if rc == MOSQ_ERR_NO_CONN.rawValue { throw MQTTError(.notConnected, "not connected to \(currentBroker)") }
        try check(rc, "mosquitto_subscribe \(topic)")
        wake()
        return mid
    }

    /// Waits for the SUBACK of `mid` and returns the granted QoS of each topic (128 = refused).
    /// A broker that forbids a subscription by its ACL may still grant it and send nothing.
    public func waitForSubscription(_ mid: Int32, timeout: Double) throws(MQTTError) -> [Int32] {
        let deadline = Date(timeIntervalSinceNow: timeout)
        changed.lock()
        defer { changed.unlock() }
        while true {
            if let g = state.withLock({ $0.subscribed.removeValue(forKey: mid) }) { return g }
            if !changed.wait(until: deadline) { throw MQTTError(.timedOut, "no SUBACK within \(timeout) s") }
        }
    }

    /// Publishes; returns the packet id. QoS 1 messages are kept by libmosquitto (in memory) and
    /// sent again after a reconnect until the broker acknowledges them (``waitForPublished(_:timeout:)``).
    /// - Throws: ``MQTTError`` `mosquittoFailed` (payload too large, bad topic, out of memory).
    @discardableResult
    public func publish(_ topic: String, _ payload: [UInt8], qos: Int32 = 1, retain: Bool = false) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes { raw in
            mosquitto_publish(mosq, &mid, topic, Int32(raw.count), raw.baseAddress, qos, retain)
        }
        // NO_CONN: libmosquitto queued it anyway and sends it after the reconnect.
        if rc != MOSQ_ERR_NO_CONN.rawValue { try check(rc, "mosquitto_publish \(topic)") }
        wake()
        return mid
    }

    /// Publishes a QoS 1 reply (a receipt) later, in order: the network thread gives it to
    /// libmosquitto when fewer than ``maxQueuedReplies`` are in flight. For a stream of replies
    /// while a backlog is read (see ``maxQueuedReplies``); the broker's acknowledgement of it is
    /// reported through `onAcknowledged`, called on the network thread (keep it short: it holds
    /// up the connection). On ``stop()`` the queued ones go out with the DISCONNECT; a reply in
    /// flight or queued is lost with the process (the daemon keeps receipts owed in its state for that).
    public func publishQueued(_ topic: String, _ payload: [UInt8], onAcknowledged: (@Sendable () -> Void)? = nil) {
        state.withLock { $0.queuedReplies.append((topic, payload, onAcknowledged)) }
        wake()
    }

    /// Waits until the broker acknowledged every one of `mids` (PUBACK for QoS 1). Returns those
    /// that were acknowledged in time.
    public func waitForPublished(_ mids: Set<Int32>, timeout: Double) -> Set<Int32> {
        let deadline = Date(timeIntervalSinceNow: timeout)
        changed.lock()
        defer { changed.unlock() }
        while true {
            let done = state.withLock { $0.published.intersection(mids) }
            if done.count == mids.count || !changed.wait(until: deadline) {
                state.withLock { $0.published.subtract(done) }
                return done
            }
        }
    }

    /// Takes the set of packet ids acknowledged since the last call (for streaming publishers).
    public func takePublished() -> Set<Int32> {
        state.withLock { s in defer { s.published = [] }; return s.published }
    }

    /// Disconnects cleanly and stops the network thread (waits for it). Not from the handlers.
    public func stop() {
        guard started else { return }
        state.withLock { $0.stopping = true }
        mosquitto_disconnect(mosq)
        wake()
        threadEnded.wait()
        started = false
        state.withLock { $0.connected = false }
    }

    // Called from the C callbacks below, on the network thread.
    func connected(_ rc: Int32) {
        let first = state.withLock { s -> Bool in
            s.lastConnack = rc
            s.connected = rc == 0
            if rc == 0 { s.connects += 1; s.lastError = nil; s.loggedFailure = nil }
            // libmosquitto sends the replies it has again itself; a reply whose PUBACK was lost
            // with the connection must not hold a place for ever.
            if rc == 0 { s.repliesInFlight = [] }
            return s.connects == 1
        }
        if rc == 0 {
            log("connected to \(currentBroker) as \(options.clientID)\(first ? "" : " (again)")")
            onConnect?()
        } else {
            log("the broker \(currentBroker) refused \(options.clientID): \(String(cString: mosquitto_connack_string(rc)))")
        }
        signal()
    }
    func disconnected(_ rc: Int32) {
        let was = state.withLock { s -> Bool in defer { s.connected = false }; return s.connected }
        if was, rc != 0 { log("connection to \(currentBroker) lost (\(String(cString: mosquitto_strerror(rc)))); reconnecting") }
        signal()
    }
    func published(_ mid: Int32) {
        let (reply, done) = state.withLock { s -> (Bool, (@Sendable () -> Void)?) in
            let done = s.replyAcknowledgements.take(mid)
            if s.repliesInFlight.remove(mid) != nil { return (true, done) }
            if done != nil { return (false, done) }  // a reply sent again after a reconnect
            s.published.insert(mid)
            return (false, nil)
        }
        done?()
        if reply { wake() } else { signal() }   // the next queued reply may go
    }
    func subscribed(_ mid: Int32, _ granted: [Int32]) {
        state.withLock { $0.subscribed[mid] = granted }
        signal()
    }
    func signal() {
        changed.lock()
        changed.broadcast()
        changed.unlock()
    }
}

/// Callbacks waiting for the broker's acknowledgement of a publish, by libmosquitto's 16-bit
/// packet id (`mid`). Ids wrap around after 65,535 publishes, so a publish still unacknowledged
/// then (one sent again after each reconnect) shares its id with a new one: both callbacks are
/// kept, oldest first, and an acknowledgement takes the oldest, as libmosquitto's own outgoing
/// list gives the acknowledgement to the oldest message with that id (`message__delete`). A
/// dictionary of one callback per id dropped the older and gave the newer the older's
/// acknowledgement.
struct PacketCallbacks {
    private var waiting: [Int32: [@Sendable () -> Void]] = [:]

    /// Waits for `mid`'s acknowledgement, after any callback already waiting for that id.
    mutating func add(_ mid: Int32, _ callback: @escaping @Sendable () -> Void) {
        waiting[mid, default: []].append(callback)
    }

    /// The oldest callback waiting for `mid`, removed; nil when none waits.
    mutating func take(_ mid: Int32) -> (@Sendable () -> Void)? {
        guard var list = waiting[mid], !list.isEmpty else { return nil }
        let first = list.removeFirst()
        waiting[mid] = list.isEmpty ? nil : list
        return first
    }

    /// How many callbacks wait, over all ids.
    var count: Int { waiting.values.reduce(0) { $0 + $1.count } }
}

// MARK: C callbacks (file scope: nonisolated, see DESIGN.md's callback trap)

private func client(_ obj: UnsafeMutableRawPointer?) -> MQTTClient? {
    obj.map { Unmanaged<MQTTClient>.fromOpaque($0).takeUnretainedValue() }
}

private let mqttOnConnect: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, Int32) -> Void = { _, obj, rc in
    client(obj)?.connected(rc)
}
private let mqttOnDisconnect: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, Int32) -> Void = { _, obj, rc in
    client(obj)?.disconnected(rc)
}
private let mqttOnPublish: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, Int32) -> Void = { _, obj, mid in
    client(obj)?.published(mid)
}
private let mqttOnLog: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?) -> Void = { _, obj, level, text in
    guard level & MOSQ_LOG_ERR != 0, let text, let c = client(obj) else { return }
    let line = String(cString: text)
    c.state.withLock { $0.libraryError = $0.libraryError.map { $0 + "; " + line } ?? line }
}
private let mqttOnSubscribe: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, Int32, Int32, UnsafePointer<Int32>?) -> Void = { _, obj, mid, count, granted in
    let g = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(count))) } ?? []
    client(obj)?.subscribed(mid, g)
}
private let mqttOnMessage: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, UnsafePointer<mosquitto_message>?) -> Void = { _, obj, msg in
    guard let c = client(obj), let m = msg?.pointee, let handler = c.onMessage else { return }
    let topic = m.topic.map { String(cString: $0) } ?? ""
    var payload: [UInt8] = []
    if let p = m.payload, m.payloadlen > 0 {
        payload = Array(UnsafeRawBufferPointer(start: p, count: Int(m.payloadlen)))
    }
    c.state.withLock { $0.unacknowledged += 1; $0.handedOutSinceFlush += 1 }
    handler(MQTTMessage(topic: topic, payload: payload, qos: m.qos, retain: m.retain, mid: m.mid), MQTTDelivery(c))
}
