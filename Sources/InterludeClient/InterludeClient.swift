import Foundation
import InterludePolicy
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// The client library apps use to talk to `interluded` (PROTOCOL.md). The `interlude` CLI is its
/// first user.
///
/// ```swift
/// let c = try InterludeClient.connect(app: "org.example.Music")
/// let s = try await c.register(category: .playback)
/// _ = try await c.activate(s)
/// for await e in c.events { … }   // interruptionBegan / interruptionEnded / duckChanged …
/// ```
public final class InterludeClient: @unchecked Sendable {
    /// The daemon's greeting.
    public private(set) var greeting: Greeting
    /// The result of `hello` (client number, our pid as the daemon sees it).
    public private(set) var hello: HelloResult
    /// Events from the daemon, in order: always those of our own sessions, every event after `subscribe()`.
    public let events: AsyncStream<WireEvent>

    let fd: Int32
    let lock = NSLock()
    var nextID = 1
    var pending: [Int: CheckedContinuation<WireReply, Error>] = [:]
    var closed = false
    /// Why the connection ended, once it has: the daemon's refusal of the connection (a reply
    /// with id null, such as `rateLimited` past `server.maxClients`) when one came, else nil
    /// ("the connection is closed"). Every request made after that fails with it.
    var closedBy: Error?
    /// Bytes read with the greeting that belong to the next line (handed to the reader thread).
    private var framerAfterGreeting = LineFramer(maxLineBytes: 16 << 20)
    let eventSink: AsyncStream<WireEvent>.Continuation

    /// The default of how long a request waits for its reply, and `connect` for the greeting, in
    /// seconds, before failing with ``ConnectionError``. A daemon answers in milliseconds (an
    /// activation that ducks others after its ramp, A11, in about 0.3 s); a daemon that stopped
    /// answering must not hang its apps.
    public static let defaultReplyTimeout: Double = 30
    /// This connection's reply timeout in seconds (see ``defaultReplyTimeout``).
    public let replyTimeout: Double

    /// Errors of the connection itself (the daemon's own errors are ``WireError``).
    public struct ConnectionError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Connects, reads the greeting and says `hello`.
    /// - Parameters:
    ///   - socket: the socket path; nil = `INTERLUDE_SOCKET` or `$XDG_RUNTIME_DIR/interlude/socket`.
    ///   - app: our app id (reverse-DNS).
    ///   - replyTimeout: seconds to wait for the greeting and for each reply.
    /// - Throws: ``ConnectionError`` when no daemon answers (or not within `replyTimeout`);
    ///   ``WireError`` when `hello` is refused, or the connection itself: `rateLimited` past
    ///   `server.maxClients`, `notAuthorized` for another user, whenever the refusal arrives
    ///   (with the greeting, after it, or after the daemon closed and the `hello` write failed).
    public static func connect(socket: String? = nil, app: String,
                               replyTimeout: Double = defaultReplyTimeout) async throws -> InterludeClient {
        let fd = try openSocket(socket ?? defaultSocketPath(environment: ProcessInfo.processInfo.environment))
        let (greeting, framer) = try readGreeting(fd: fd, replyTimeout: replyTimeout)
        let client = InterludeClient(fd: fd, replyTimeout: replyTimeout, greeting: greeting, framerAfterGreeting: framer)
        client.startReader()
        client.hello = try await client.call(WireMethod.hello, HelloParams(app: app), as: HelloResult.self)
        return client
    }

    /// Connects, says `hello` and sends one request in the same write, reads the greeting and both
    /// replies on the calling thread (no reader thread), closes, and returns the request's result.
    /// One round trip instead of three (greeting, hello, request) for a client with one thing to
    /// say, such as `interlude play`: the daemon handles a connection's requests in order after its
    /// greeting (PROTOCOL.md "Order"). Blocks until the daemon answers.
    /// - Throws: ``ConnectionError`` when no daemon answers, or no reply within `replyTimeout`
    ///   seconds; ``WireError`` when the daemon refuses the connection, `hello` or the request.
    public static func request<P: Encodable, R: Decodable>(socket: String? = nil, app: String, _ method: String, _ params: P,
                                                           as: R.Type, replyTimeout: Double = defaultReplyTimeout) throws -> R {
        let fd = try openSocket(socket ?? defaultSocketPath(environment: ProcessInfo.processInfo.environment))
        defer { Glibc.close(fd) }
        setReceiveTimeout(fd, seconds: replyTimeout)
        // Encoded straight from the typed params, one encoder pass per line (no JSONValue round trip
        // through the decoder before the request is on its way).
        let encoder = WireCoding.encoder
        var out = try encoder.encode(RequestLine(id: 1, method: WireMethod.hello, params: HelloParams(app: app)))
        out.append(0x0a)
        out += try encoder.encode(RequestLine(id: 2, method: method, params: params))
        out.append(0x0a)
        // A daemon that refuses the connection (id null: `rateLimited`, `notAuthorized`) writes its
        // greeting and the refusal and closes: a write that fails (EPIPE) is read past, so the
        // refusal is what is thrown.
        var writeError: ConnectionError?
        if !sendAll(fd, out) { writeError = ConnectionError(description: "write failed: \(String(cString: strerror(errno)))") }
        var framer = LineFramer(maxLineBytes: 16 << 20)
        var buf = [UInt8](repeating: 0, count: 65536)
        var greeted = false
        while true {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw noReply(method, after: replyTimeout) }
            guard n > 0 else { throw writeError ?? ConnectionError(description: "the daemon closed the connection") }
            guard let lines = try? framer.feed(buf[0..<n]) else { throw ConnectionError(description: "a line from the daemon is too long") }
            for line in lines {
                guard let message = try? ServerMessage.parse(line) else { continue }
                switch message {
                case .greeting: greeted = true
                case .event: continue
                case let .reply(r):
                    guard greeted else { throw ConnectionError(description: "no greeting from the daemon") }
                    if let e = r.error { throw e }  // a refused connection (id null), hello, or the request
                    if r.id == .number(2) { return try (r.result ?? .object([:])).decode(R.self) }
                }
            }
        }
    }

    /// A request line with typed params (PROTOCOL.md "Messages").
    private struct RequestLine<P: Encodable>: Encodable {
        var id: Int
        var method: String
        var params: P
    }

    /// A connected Unix stream socket to `path` (close-on-exec).
    static func openSocket(_ path: String) throws -> Int32 {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ConnectionError(description: "socket: \(String(cString: strerror(errno)))") }
        let rc: Int32
        do { rc = try UnixSocket.attach(fd, to: path, listen: false) } catch {
            Glibc.close(fd); throw ConnectionError(description: "\(error)")
        }
        guard rc == 0 else {
            let code = errno
            Glibc.close(fd)
            // A file or folder that is not a socket: say so ("Connection refused" read as a daemon
            // that went away; a stranger's find).
            var st = stat()
            if code == ECONNREFUSED, stat(path, &st) == 0, st.st_mode & S_IFMT != S_IFSOCK {
                let what = st.st_mode & S_IFMT == S_IFDIR ? "a folder" : "a file"
                throw ConnectionError(description: "\(path) is \(what), not a daemon's socket; give the socket with --socket PATH")
            }
            throw ConnectionError(description: "no daemon at \(path) (\(String(cString: strerror(code)))); start one with `interluded`")
        }
        return fd
    }

    /// Makes `read` on `fd` give up after `seconds` (0 = wait for ever) with EAGAIN.
    static func setReceiveTimeout(_ fd: Int32, seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1e6))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    static func noReply(_ method: String, after seconds: Double) -> ConnectionError {
        ConnectionError(description: "no reply to \(method) within \(seconds) s; the daemon is not answering")
    }

    /// Writes all of `data` (no SIGPIPE in apps: MSG_NOSIGNAL). False on a write error.
    static func sendAll(_ fd: Int32, _ data: Data) -> Bool {
        data.withUnsafeBytes { raw -> Bool in
            var off = 0
            while off < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + off, raw.count - off, Int32(MSG_NOSIGNAL))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                off += n
            }
            return true
        }
    }

    /// `INTERLUDE_SOCKET`, else `$XDG_RUNTIME_DIR/interlude/socket`, else `/tmp/interlude-UID/socket`.
    public static func defaultSocketPath(environment: [String: String]) -> String {
        if let env = environment["INTERLUDE_SOCKET"], !env.isEmpty { return env }
        if let run = environment["XDG_RUNTIME_DIR"], !run.isEmpty { return run + "/interlude/socket" }
        return "/tmp/interlude-\(getuid())/socket"
    }

    /// Takes over `fd` once the greeting has been read: from here on `deinit` is what closes it.
    /// Not throwing, so that no path closes the socket and then lets `deinit` close the same
    /// number again (by then possibly another connection's: issue 7, the 500-client row).
    private init(fd: Int32, replyTimeout: Double, greeting: Greeting, framerAfterGreeting: LineFramer) {
        self.fd = fd
        self.replyTimeout = replyTimeout
        (events, eventSink) = AsyncStream.makeStream(of: WireEvent.self, bufferingPolicy: .unbounded)
        self.greeting = greeting
        hello = HelloResult(client: 0, pid: 0)
        self.framerAfterGreeting = framerAfterGreeting
    }

    /// Reads the greeting, the first line, synchronously. The daemon greets at once; the timeout
    /// keeps a wedged daemon from hanging us. Closes `fd` when it throws (and only then): the
    /// caller owns it again only on success.
    /// - Returns: the greeting and the framer holding any bytes read past it (the start of a
    ///   refusal cut by the read, or still on its way, is read by the reader thread with them).
    /// - Throws: ``ConnectionError`` (no greeting within `replyTimeout` seconds, closed, not a
    ///   greeting); ``WireError`` when the line after the greeting is the daemon's refusal.
    private static func readGreeting(fd: Int32, replyTimeout: Double) throws -> (Greeting, LineFramer) {
        setReceiveTimeout(fd, seconds: replyTimeout)
        defer { setReceiveTimeout(fd, seconds: 0) }
        var framer = LineFramer(maxLineBytes: 16 << 20)
        var buf = [UInt8](repeating: 0, count: 4096)
        do {
            while true {
                let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    throw ConnectionError(description: "no greeting within \(replyTimeout) s; the daemon is not answering")
                }
                if n < 0 { throw ConnectionError(description: "reading the greeting failed: \(String(cString: strerror(errno)))") }
                guard n > 0 else { throw ConnectionError(description: "the daemon closed the connection before greeting") }
                let lines = (try? framer.feed(buf[0..<n])) ?? []
                guard let first = lines.first else { continue }
                guard case let .greeting(g)? = try? ServerMessage.parse(first) else {
                    throw ConnectionError(description: "no greeting from the daemon")
                }
                // The daemon only speaks after the greeting when asked; anything else is an error line.
                if let second = lines.dropFirst().first, case let .reply(r)? = try? ServerMessage.parse(second), let e = r.error {
                    throw e
                }
                return (g, framer)
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    private func startReader() {
        let t = Thread { [self] in readLoop() }
        t.name = "interlude-client-reader"
        t.start()
    }

    private func readLoop() {
        var framer = framerAfterGreeting
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            guard let lines = try? framer.feed(buf[0..<n]) else { break }
            for line in lines {
                guard let m = try? ServerMessage.parse(line) else { continue }
                switch m {
                case let .event(e): eventSink.yield(e)
                case let .reply(r):
                    lock.lock()
                    let k: CheckedContinuation<WireReply, Error>?
                    if case let .number(n) = r.id { k = pending.removeValue(forKey: Int(n)) } else { k = nil }
                    let orphanError = k == nil ? r.error : nil
                    if let orphanError, r.id == .null { closedBy = orphanError }  // a refusal of the connection
                    lock.unlock()
                    k?.resume(returning: r)
                    if let orphanError { failAll(orphanError) }
                case .greeting: break
                }
            }
        }
        failAll(lock.withLock { closedBy } ?? ConnectionError(description: "the daemon closed the connection"))
    }

    private func failAll(_ error: Error) {
        lock.lock()
        let all = pending.values
        pending = [:]
        let wasClosed = closed
        closed = true
        lock.unlock()
        for k in all { k.resume(throwing: error) }
        if !wasClosed { eventSink.finish() }
    }

    /// Sends a request and waits for its reply.
    /// - Throws: ``WireError`` from the daemon, ``ConnectionError`` if the connection is gone.
    public func call<P: Encodable, R: Decodable>(_ method: String, _ params: P, as: R.Type) async throws -> R {
        let reply = try await raw(method, params: try JSONValue(encoding: params))
        if let e = reply.error { throw e }
        return try (reply.result ?? .object([:])).decode(R.self)
    }

    /// Sends a request with untyped params and returns the raw reply.
    public func raw(_ method: String, params: JSONValue) async throws -> WireReply {
        try await withCheckedThrowingContinuation { (k: CheckedContinuation<WireReply, Error>) in
            lock.lock()
            if closed {
                // A refusal that arrived before this request (the reader saw it and the close first)
                // is this request's error too: `connect` throws `rateLimited`, not "closed".
                let error = closedBy ?? ConnectionError(description: "the connection is closed")
                lock.unlock(); k.resume(throwing: error); return
            }
            let id = nextID
            nextID += 1
            pending[id] = k
            lock.unlock()
            let timeout = replyTimeout
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
                guard let self else { return }
                self.lock.lock()
                let late = self.pending.removeValue(forKey: id)
                self.lock.unlock()
                late?.resume(throwing: Self.noReply(method, after: timeout))
            }
            do {
                var line = try WireRequest(id: .number(Double(id)), method: method, params: params.objectValue ?? [:]).encoded()
                line.append(0x0a)
                if !Self.sendAll(fd, line) {
                    // The daemon closed: EPIPE / ECONNRESET. What it wrote before closing (a refusal
                    // of the connection) is still to be read: the reader fails this request with it,
                    // or with "closed", when it reaches the end (it must: the peer is gone).
                    if errno == EPIPE || errno == ECONNRESET { return }
                    throw ConnectionError(description: "write failed: \(String(cString: strerror(errno)))")
                }
            } catch {
                lock.lock()
                let kk = pending.removeValue(forKey: id)
                lock.unlock()
                kk?.resume(throwing: error)
            }
        }
    }

    /// Closes the connection. The daemon deactivates our sessions, notifying others (A9).
    public func close() {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    deinit { Glibc.close(fd) }

    // MARK: Typed methods

    /// `session.register`. Returns the session id to tag our streams with (`interlude.session`).
    public func register(category: AudioCategory, mode: AudioMode = .default, options: [AudioSessionOption] = []) async throws -> AudioSessionID {
        try await call(WireMethod.sessionRegister, RegisterParams(category: category, mode: mode, options: options), as: RegisterResult.self).session
    }
    /// `session.activate`. Throws ``WireError`` `insufficientPriority` during a call unless `acceptsDelay` (A4).
    public func activate(_ s: AudioSessionID, acceptsDelay: Bool = false) async throws -> ActivateResult {
        try await call(WireMethod.sessionActivate, ActivateParams(session: s, acceptsDelay: acceptsDelay), as: ActivateResult.self)
    }
    /// `session.deactivate`, notifying others by default (A5).
    public func deactivate(_ s: AudioSessionID, notifyOthers: Bool = true) async throws {
        _ = try await call(WireMethod.sessionDeactivate, DeactivateParams(session: s, notifyOthers: notifyOthers), as: JSONValue.self)
    }
    /// `session.setPlaying`.
    public func setPlaying(_ s: AudioSessionID, _ playing: Bool) async throws {
        _ = try await call(WireMethod.sessionSetPlaying, SetPlayingParams(session: s, playing: playing), as: JSONValue.self)
    }
    /// `status`.
    public func status() async throws -> StatusResult {
        try await call(WireMethod.status, StatusParams(), as: StatusResult.self)
    }
    /// `subscribe`: from now on `events` carries every event of the daemon.
    public func subscribe() async throws {
        _ = try await call(WireMethod.subscribe, SubscribeParams(), as: JSONValue.self)
    }
    /// `sound.play`; volume is linear amplitude 0…1.
    public func play(_ sound: String, volume: Double? = nil) async throws -> SoundPlayResult {
        try await call(WireMethod.soundPlay, SoundPlayParams(sound: sound, volume: volume), as: SoundPlayResult.self)
    }
    /// `ringer.set` (A12).
    public func setRinger(silent: Bool) async throws {
        _ = try await call(WireMethod.ringerSet, RingerParams(mode: silent ? "silent" : "ring"), as: JSONValue.self)
    }

    /// The whole center listing: every page of `notification.delivered` (it pages by count and
    /// size, so that a center of large bodies never exceeds the daemon's output limit, issue 7),
    /// merged in order. `app` nil with `all`: every app's (the user's tool); nil without: the
    /// caller's own.
    /// - Throws: the daemon's error for a page, or a connection error.
    public func wholeCenter(app: String? = nil, all: Bool = false) async throws -> NotificationListResult {
        var whole = NotificationListResult(notifications: [], pending: [])
        var offset = 0
        while true {
            let page = try await call(NotificationMethod.delivered,
                                      ListNotificationsParams(app: app, all: all ? true : nil, offset: offset),
                                      as: NotificationListResult.self)
            whole.notifications += page.notifications
            whole.pending += page.pending
            whole.badges = page.badges
            whole.deliveredCount = page.deliveredCount
            whole.pendingCount = page.pendingCount
            guard page.more, let next = page.nextOffset, next > offset else { return whole }
            offset = next
        }
    }
}
