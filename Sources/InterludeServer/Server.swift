import CInterludeSys
import Dispatch
import Foundation
import InterludeEngine
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// The Unix-socket server (PROTOCOL.md): greets, checks the peer's uid (`SO_PEERCRED`), requires
/// `hello`, maps requests to engine calls, and routes events.
public final class SocketServer: @unchecked Sendable {
    public let path: String
    let engine: Engine
    let maxClients: Int
    /// Connections served at once for one peer process (`server.maxClientsPerProcess`): a process
    /// that leaks connections cannot take all of `maxClients` from the user's other apps and tools.
    let maxClientsPerProcess: Int
    let maxOutputBytes: Int
    /// What one connection may make the daemon hold (PROTOCOL.md "Limits").
    let limits: ConnectionLimits
    let log: @Sendable (String) -> Void
    private var listenFD: Int32 = -1
    private var acceptSource: DispatchSourceRead?
    private let queue = DispatchQueue(label: "interlude.server")
    private var open = 0
    /// Connections being served by peer pid (refused ones not counted); on `queue`.
    private var servedByPid: [Int32: Int] = [:]
    /// The connections counted in `servedByPid`, with their peer's pid; on `queue`.
    private var countedPid: [ObjectIdentifier: Int32] = [:]
    /// Processes refused at `maxClientsPerProcess` since they were last below it (logged once); on `queue`.
    private var refusedPids: Set<Int32> = []
    /// Whether connections were refused at `maxClients` since the count was last below it
    /// (logged once); on `queue`.
    private var refusingAtMax = false
    /// Handlers still deciding requests, and the point where they all are done when stopping.
    private let stopping = StopGate()
    /// The connections being served, with their handler's task (nil for one being refused), by
    /// identity; on `queue`.
    private var live: [ObjectIdentifier: (connection: Connection, handler: Task<Void, Never>?)] = [:]
    /// Whether start() bound the socket at `path` (stop removes only that).
    private var bound = false

    /// The socket path: `--socket`, else `INTERLUDE_SOCKET`, else `$XDG_RUNTIME_DIR/interlude/socket`
    /// (or `/tmp/interlude-UID/socket` without XDG_RUNTIME_DIR). A relative path is taken from the
    /// current folder and made absolute (`--socket rel.sock` failed: "cannot create : No such
    /// file or directory", the folder of a bare file name being empty).
    public static func defaultPath(flag: String?, environment: [String: String]) -> String {
        func absolute(_ p: String) -> String { p.hasPrefix("/") ? p : FileManager.default.currentDirectoryPath + "/" + p }
        if let flag { return absolute(flag) }
        if let env = environment["INTERLUDE_SOCKET"], !env.isEmpty { return absolute(env) }
        if let run = environment["XDG_RUNTIME_DIR"], !run.isEmpty { return run + "/interlude/socket" }
        return "/tmp/interlude-\(getuid())/socket"
    }

    /// - Parameters:
    ///   - maxClients: open connections at most (`server.maxClients`); more are refused `rateLimited`.
    ///   - maxClientsPerProcess: connections served at once for one peer process
    ///     (`server.maxClientsPerProcess`); more from it are refused `rateLimited`.
    ///   - maxOutputBytes: bytes of replies and events waiting per connection (`server.maxOutputBytes`).
    ///   - maxQueuedRequests, maxReadAheadBytes: requests and bytes received but not yet handled per
    ///     connection before the daemon stops reading it (``ConnectionLimits``).
    public init(path: String, engine: Engine, maxClients: Int = 256, maxClientsPerProcess: Int = 128, maxOutputBytes: Int = 1 << 20,
                maxQueuedRequests: Int = ConnectionLimits().maxQueuedRequests,
                maxReadAheadBytes: Int = ConnectionLimits().maxReadAheadBytes,
                log: @escaping @Sendable (String) -> Void) {
        self.path = path; self.engine = engine; self.maxClients = maxClients; self.maxOutputBytes = maxOutputBytes; self.log = log
        self.maxClientsPerProcess = maxClientsPerProcess
        self.limits = ConnectionLimits(maxOutputBytes: maxOutputBytes, maxQueuedRequests: maxQueuedRequests,
                                       maxReadAheadBytes: maxReadAheadBytes)
        // A page of the center stays well under what a connection may hold.
        engine.listPageBytes.set(min(ListNotificationsParams.listPageBytes, maxOutputBytes / 4))
    }

    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Creates the folder (0700) and socket (0600), refusing to steal a live daemon's socket
    /// (PROTOCOL.md "Transport", issue 7 hole 11).
    ///
    /// The folder must be ours (owned by our effective uid), or root's with the sticky bit (like
    /// `/tmp`: nobody else can remove or replace our socket there); a folder of ours that others
    /// may write to (group or other write, no sticky bit) is set to 0700 with a warning. Only a
    /// stale socket is removed: a regular file, a folder or anything else at the path is left as it
    /// is and refused.
    /// - Throws: ``StartError`` naming the path and the reason (the system error where one failed).
    public func start() throws {
        let dir = (path as NSString).deletingLastPathComponent
        // A path too long for an address is refused before anything is made for it (its folder
        // was left behind).
        do { _ = try UnixSocket.address(path) } catch { throw StartError(description: "\(error)") }
        if mkdir(dir, 0o700) != 0 && errno != EEXIST {
            throw StartError(description: "cannot create \(dir): \(String(cString: strerror(errno)))")
        }
        try checkFolder(dir.isEmpty ? "." : dir)
        var st = stat()
        if lstat(path, &st) == 0 {
            switch st.st_mode & S_IFMT {
            case S_IFSOCK:
                if SocketServer.isLive(path) { throw StartError(description: "another daemon is listening on \(path)") }
                unlink(path)  // a stale socket of an earlier run
            case S_IFDIR:
                throw StartError(description: "\(path) is a folder; --socket names the socket file to create (e.g. \(path)/socket)")
            default:
                throw StartError(description: "\(path) exists and is not a socket; refusing to replace it (remove it, or choose another --socket)")
            }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw StartError(description: "socket: \(String(cString: strerror(errno)))") }
        let rc: Int32
        do { rc = try UnixSocket.attach(fd, to: path, listen: true) } catch {
            close(fd); throw StartError(description: "\(error)")
        }
        guard rc == 0 else { close(fd); throw StartError(description: "bind \(path): \(String(cString: strerror(errno)))") }
        bound = true
        chmod(path, 0o600)
        // The system's backlog (`SOMAXCONN`: 4096, capped by net.core.somaxconn): a burst of
        // connections waits to be accepted instead of failing; 64 made a non-blocking connect
        // fail with EAGAIN during a burst of 300 (a stranger's find).
        guard listen(fd, SOMAXCONN) == 0 else { close(fd); throw StartError(description: "listen: \(String(cString: strerror(errno)))") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        listenFD = fd
        let src = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        src.setEventHandler { [weak self] in self?.acceptAll() }
        // Closed only once the source is off the fd: closing it earlier lets the number be reused
        // (by the next socket anyone opens) while libdispatch still watches it, and the late
        // unregistration then removes the new socket's watch, which never fires again.
        src.setCancelHandler { _ = Glibc.close(fd) }
        acceptSource = src
        src.resume()
    }

    /// Refuses a socket folder that is not ours; makes one of ours that others may write to 0700.
    private func checkFolder(_ dir: String) throws {
        var st = stat()
        guard stat(dir, &st) == 0 else {
            throw StartError(description: "cannot use \(dir): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & S_IFMT == S_IFDIR else { throw StartError(description: "\(dir) is not a folder") }
        let sticky = st.st_mode & S_ISVTX != 0
        if st.st_uid != geteuid() {
            guard st.st_uid == 0 && sticky else {
                throw StartError(description: "the socket folder \(dir) belongs to uid \(st.st_uid), not to us (uid \(geteuid())); "
                    + "another user could replace the socket: refusing it (remove the folder, or choose another --socket)")
            }
            return
        }
        let mode = st.st_mode & 0o7777
        if mode & 0o022 != 0 && !sticky {
            guard chmod(dir, 0o700) == 0 else {
                throw StartError(description: "the socket folder \(dir) has mode \(String(mode, radix: 8)) and cannot be made 0700: \(String(cString: strerror(errno)))")
            }
            log("warning: the socket folder \(dir) had mode \(String(mode, radix: 8)) (others could write to it); set it to 0700")
        }
    }

    /// Stops accepting and removes the socket file. The listening socket is closed when its
    /// dispatch source has been cancelled.
    public func stop() {
        queue.sync { stopAcceptingOnQueue() }
        if bound { unlink(path) }  // only our own socket: never a file start() refused
    }

    /// Stops accepting (on `queue`): the listening socket is closed when its source is cancelled.
    private func stopAcceptingOnQueue() {
        if let source = acceptSource {
            source.cancel()
            acceptSource = nil
        } else if listenFD >= 0 {
            close(listenFD)
        }
        listenFD = -1
    }

    /// The paced lines waiting in each open connection (``Connection/pacedLinesWaiting``), for
    /// tests: whether connections hold a removal's bytes together.
    var pacedLinesWaiting: [[Data]] { queue.sync { live.values.map { $0.connection.pacedLinesWaiting } } }

    /// The output lines not yet written in each open connection (``Connection/outputLinesWaiting``),
    /// for tests: whether connections that do not read hold the same events' bytes together.
    var outputLinesWaiting: [[Data]] { queue.sync { live.values.map { $0.connection.outputLinesWaiting } } }

    /// Whether a daemon answers on the socket at `path`.
    public static func isLive(_ path: String) -> Bool { UnixSocket.isLive(path) }

    private func connectionClosed(_ id: ObjectIdentifier) {
        queue.async {
            self.open -= 1
            self.live[id] = nil
            if self.open < self.maxClients { self.refusingAtMax = false }
            if let pid = self.countedPid.removeValue(forKey: id) {
                let left = (self.servedByPid[pid] ?? 1) - 1
                self.servedByPid[pid] = left > 0 ? left : nil
                self.refusedPids.remove(pid)
            }
        }
    }

    /// Stops the server as the daemon stops (SIGTERM): stops accepting, stops reading every
    /// connection (requests not yet read or not yet handed over are dropped unanswered: never
    /// decided, never saved), lets the requests being decided finish (their commits, their
    /// events to the user's tools, their replies), then closes each connection once what it was
    /// sent has been written. So every notification saved was acknowledged to a client that is
    /// still connected, and each tool watching saw its events (N15). Waits at most `timeout`
    /// seconds for the handlers, then closes what is left; removes the socket file.
    public func shutDown(timeout: Double = 5) async {
        let handlers: [Task<Void, Never>] = queue.sync {
            stopAcceptingOnQueue()
            self.stopping.close()  // before any handler can finish for want of requests
            for (c, _) in live.values { c.stopReading() }
            return live.values.compactMap(\.handler)
        }
        if bound { unlink(path) }
        let stopping = self.stopping
        let finished = await finishes(within: timeout) { await stopping.allHandlersDone() }
        if !finished { log("stopping: requests still being decided after \(timeout) s; closing their connections") }
        stopping.open()
        _ = await finishes(within: 1) { for h in handlers { await h.value } }
        let left: [Connection] = queue.sync { live.values.map(\.connection) }
        for c in left { c.closeWhenFlushed() }
        // What was sent is written unless a peer does not read: then it is closed after a second.
        let deadline = Date().addingTimeInterval(1)
        while queue.sync(execute: { open }) > 0, Date() < deadline { try? await Task.sleep(nanoseconds: 5_000_000) }
        for c in queue.sync(execute: { live.values.map(\.connection) }) { c.close() }
    }

    private func acceptAll() {
        while listenFD >= 0 {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 { return }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var pid: Int32 = 0, uid: UInt32 = 0, gid: UInt32 = 0
            let credOK = interlude_peer_credentials(fd, &pid, &uid, &gid) == 0
            // N3: the peer's executable and start time, read now, before any await (issue 7 hole 10).
            let peer = PeerIdentity.read(pid: pid, fd: fd)
            // onClose is given at init, before start: a connection that closes at once is counted
            // out too. Every connection counts until it has closed, the refused ones included.
            // The connection's identity, known before it exists: its onClose takes it off `live`.
            let box = IdentityBox()
            let conn = Connection(fd: fd, pid: pid, limits: limits, removalAllowance: engine.removalAllowance, log: log, onClose: { [weak self] in
                if let id = box.id { self?.connectionClosed(id) }
            })
            box.id = ObjectIdentifier(conn)
            open += 1
            live[ObjectIdentifier(conn)] = (conn, nil)
            // The greeting is written before the connection reads: a first line over the cap,
            // read at once, closed it with `tooLarge` before the greeting was queued, and the
            // greeting was lost (a stranger's find). A socket accept()ed is empty: the line
            // goes out whole, without blocking.
            conn.send(.greeting(Greeting(version: engine.version)))
            conn.start()
            guard credOK, uid == geteuid() else {
                log("refused a client of uid \(uid) (pid \(pid)): not ours")
                conn.send(.reply(WireReply(id: nil, error: WireError(.notAuthorized, "peer uid \(uid) is not the daemon's uid \(geteuid())"))))
                conn.closeWhenFlushed()
                continue
            }
            guard open <= maxClients else {
                // Logged once per stretch at the limit, as the per-process one (a stranger saw
                // the per-process refusals in the log and these not at all).
                if !refusingAtMax {
                    refusingAtMax = true
                    log("\(maxClients) connections open (server.maxClients); refusing more until one closes (client pid \(pid) refused first)")
                }
                conn.send(.reply(WireReply(id: nil, error: WireError(.rateLimited, "too many connections (\(maxClients))"))))
                conn.closeWhenFlushed()
                continue
            }
            let fromPeer = servedByPid[pid] ?? 0
            guard fromPeer < maxClientsPerProcess else {
                // Logged once per stretch at the cap (the check `fromPeer == max` it had was always
                // true here: every refused connection was a log line).
                if refusedPids.insert(pid).inserted {
                    log("client pid \(pid) holds \(fromPeer) connections (server.maxClientsPerProcess); refusing more from it")
                }
                conn.send(.reply(WireReply(id: nil, error: WireError(.rateLimited,
                    "too many connections from this process (\(maxClientsPerProcess), server.maxClientsPerProcess)"))))
                conn.closeWhenFlushed()
                continue
            }
            servedByPid[pid] = fromPeer + 1
            countedPid[ObjectIdentifier(conn)] = pid
            let engine = self.engine
            let log = self.log
            // A connection's requests run below the engine's audio lane; its audio requests run
            // in it, one by one (RequestHandler.run, EngineExecutor).
            let stopping = self.stopping
            stopping.handlerStarted()
            let handler = Task(executorPreference: conn.taskExecutor, priority: RequestHandler.handlerPriority) {
                let client = await engine.connect(peer: peer) { [weak conn] event in conn?.send(paced: event.paced, encoded: { event.line }) }
                await RequestHandler(engine: engine, client: client, connection: conn, log: log).run()
                // A peer that half-closed has had every reply (run drains them): closed now.
                if conn.peerFinishedSending { conn.closeWhenFlushed() }
                // When the daemon stops, a connection stays the engine's client (a user's tool keeps
                // receiving the events of the commits still in flight) until every handler is done.
                await stopping.handlerDone()
                await engine.disconnect(client: client)
            }
            if live[ObjectIdentifier(conn)] != nil { live[ObjectIdentifier(conn)] = (conn, handler) }
        }
    }
}

/// Serves one connection's requests, in order.
struct RequestHandler {
    let engine: Engine
    let client: Int
    let connection: Connection
    let log: @Sendable (String) -> Void

    /// The requests that run in the engine's audio lane (``EngineExecutor``): audio sessions and
    /// sounds. Every other request (notifications, status, settings) runs below it, whichever
    /// connection it comes on.
    static let audioMethods: Set<String> = [
        WireMethod.sessionRegister, WireMethod.sessionActivate, WireMethod.sessionDeactivate,
        WireMethod.sessionSetPlaying, WireMethod.soundPlay,
    ]

    /// The requests whose reply is paced (``Connection/send(paced:_:)``): it may pass
    /// `server.maxOutputBytes` alone and wait for the peer to read. A removal's reply lists every
    /// identifier removed (a whole center, as its `notificationRemoved` parts), which the client
    /// cannot ask for in parts. Not a center page (it follows `maxOutputBytes`, ``Engine/listPageBytes``)
    /// nor `status`: paced, a client pipelining them without reading was held up to a whole
    /// removal, not `maxOutputBytes` (`pipeliningNonReaderIsClosedAtTheOutputBound`).
    static let pacedReplies: Set<String> = [NotificationMethod.remove]

    /// At most this many `notification.add`s of one connection decided and waiting for their
    /// commit (the client library's pipelining depth).
    static let maxPipelined = 16

    /// Requests are taken in order, one at a time, except that `notification.add`s are pipelined
    /// (issue 9): the adds that have arrived back to back are decided at once, together
    /// (``Engine/beginAddNotifications(client:_:whenSettled:)``), and the handler goes on reading while their
    /// state is committed; each reply is written, in request order, by the thread that settles it
    /// (``ReplySequencer``), once its state is durable. At most ``maxPipelined`` adds wait for
    /// their commit; before any other request the handler waits until every add's reply is
    /// written: every other request sees the state of the ones before it, and every reply keeps
    /// the request order.
    func run() async {
        var greeted = false
        let replies = ReplySequencer(connection: connection)
        func flush() async { await replies.drained() }
        /// A request read ahead while gathering a batch of adds, handled next.
        var carried: Result<WireRequest, WireParseError>?
        while true {
            let parsed: Result<WireRequest, WireParseError>
            if let c = carried {
                parsed = c
                carried = nil
            } else {
                guard let line = await connection.nextRequest() else { break }
                parsed = Result { () throws(WireParseError) in try WireRequest.parse(line) }
            }
            let request: WireRequest
            switch parsed {
            case let .failure(error):
                await flush()
                connection.reply(.reply(WireReply(id: error.id, error: error.error)))
                continue
            case let .success(r): request = r
            }
            if greeted, request.method == NotificationMethod.add {
                if replies.outstanding >= Self.maxPipelined { await flush() }
                // The adds already read behind this one join it: one engine call, one commit.
                var batch = [request]
                while replies.outstanding + batch.count < Self.maxPipelined, let line = connection.nextRequestIfReady() {
                    let next = Result { () throws(WireParseError) in try WireRequest.parse(line) }
                    guard case let .success(r) = next, r.method == NotificationMethod.add else { carried = next; break }
                    batch.append(r)
                }
                let numbers = batch.map { _ in replies.reserve() }
                let params = batch.map { r in Result { () throws(WireError) in try r.decodeParams(AddNotificationParams.self) } }
                // Each reply is written where its request is settled, with its events (one send).
                let ids = batch.map(\.id)
                _ = await engine.beginAddNotifications(client: client, params) { i, r in
                    replies.settle(numbers[i], id: ids[i], r.flatMap { v in
                        Result { () throws(WireError) in
                            do { return try WireCoding.encode(v) } catch { throw WireError(.internalError, "cannot encode result") }
                        }
                    })
                }
                continue
            }
            await flush()
            if !greeted && request.method != WireMethod.hello {
                connection.reply(.reply(WireReply(id: request.id, error: WireError(.helloRequired, "the first request must be hello"))))
                continue
            }
            if Self.audioMethods.contains(request.method) {
                // An audio request runs in the engine's audio lane (EngineExecutor), the request
                // only: a task of the lane's priority, started on this thread (no hop), is decided
                // before the notification work queued on the engine and writes its reply itself,
                // on a thread of the lane's priority, so the reply does not wait for this
                // handler's task to be woken behind a burst's handlers in Swift's pool. The connection's task keeps
                // its priority: its other requests (an audio app's notification flood too) run
                // below the lane. (Raising the connection's task took all of them into the lane:
                // a task's priority only goes up; issue 9.)
                let connection = self.connection
                let handler = self
                await Task.immediate(priority: EngineExecutor.audioLanePriority, executorPreference: connection.taskExecutor) {
                    do throws(WireError) {
                        connection.reply(id: request.id, result: try await handler.dispatch(request))
                    } catch {
                        connection.reply(.reply(WireReply(id: request.id, error: error)))
                    }
                }.value
                continue
            }
            do {
                let result = try await dispatch(request)
                if request.method == WireMethod.hello { greeted = true }
                connection.reply(id: request.id, result: result, paced: Self.pacedReplies.contains(request.method))
            } catch {
                connection.reply(.reply(WireReply(id: request.id, error: error)))
            }
        }
        await flush()
    }

    /// The priority of a connection's task: below the audio lane (``EngineExecutor``), where only
    /// its audio requests run.
    static let handlerPriority = TaskPriority.medium

    /// Maps one request to the engine and returns the result encoded (JSON, the wire's settings).
    /// Params are validated (unknown fields refused) before any side effect. The result is encoded
    /// once, from its type, straight to bytes: through a `JSONValue` it was encoded, decoded and
    /// encoded again, most of the daemon's time under many clients (issue 7 hole 6).
    func dispatch(_ r: WireRequest) async throws(WireError) -> Data {
        func encode<T: Encodable>(_ v: T) throws(WireError) -> Data {
            do { return try WireCoding.encode(v) } catch { throw WireError(.internalError, "cannot encode result") }
        }
        let empty = Data("{}".utf8)
        switch r.method {
        case WireMethod.hello:
            let p = try r.decodeParams(HelloParams.self)
            if let v = p.protocol, v != interludeProtocolVersion {
                throw WireError(.badRequest, "protocol \(v) is not supported (this daemon speaks \(interludeProtocolVersion))")
            }
            return try encode(try await engine.hello(client: client, app: p.app))
        case WireMethod.sessionRegister:
            return try encode(try await engine.register(client: client, r.decodeParams(RegisterParams.self)))
        case WireMethod.sessionActivate:
            return try encode(try await engine.activate(client: client, r.decodeParams(ActivateParams.self)))
        case WireMethod.sessionDeactivate:
            try await engine.deactivate(client: client, r.decodeParams(DeactivateParams.self))
            return empty
        case WireMethod.sessionSetPlaying:
            try await engine.setPlaying(client: client, r.decodeParams(SetPlayingParams.self))
            return empty
        case WireMethod.status:
            _ = try r.decodeParams(StatusParams.self)
            return try encode(await engine.status())
        case WireMethod.subscribe:
            _ = try r.decodeParams(SubscribeParams.self)
            await engine.subscribe(client: client)
            return empty
        case WireMethod.soundPlay:
            return try encode(try await engine.playSound(client: client, r.decodeParams(SoundPlayParams.self)))
        case WireMethod.ringerSet:
            let p = try r.decodeParams(RingerParams.self)
            guard p.mode == "silent" || p.mode == "ring" else { throw WireError(.badRequest, "mode must be silent or ring") }
            try await engine.setRinger(client: client, silent: p.mode == "silent")
            return empty
        case WireMethod.configReload:
            _ = try r.decodeParams(ReloadParams.self)
            return try encode(try await engine.requestReload(client: client))
        case NotificationMethod.requestAuthorization:
            return try encode(try await engine.requestAuthorization(client: client, r.decodeParams(RequestAuthorizationParams.self)))
        case NotificationMethod.add:
            return try encode(try await engine.addNotification(client: client, r.decodeParams(AddNotificationParams.self)))
        case NotificationMethod.pending, NotificationMethod.delivered:
            return try encode(try await engine.listNotifications(client: client, r.decodeParams(ListNotificationsParams.self)))
        case NotificationMethod.remove:
            return try encode(try await engine.removeNotifications(client: client, r.decodeParams(RemoveNotificationsParams.self)))
        case NotificationMethod.setBadge:
            try await engine.setBadge(client: client, r.decodeParams(SetBadgeParams.self))
            return empty
        case RemoteMethod.registerRemote:
            return try encode(try await engine.registerRemote(client: client, r.decodeParams(RegisterRemoteParams.self)))
        case NotificationMethod.registerCategories:
            try await engine.registerCategories(client: client, r.decodeParams(RegisterCategoriesParams.self))
            return empty
        case NotificationMethod.respond:
            try await engine.respond(client: client, r.decodeParams(RespondParams.self))
            return empty
        case NotificationMethod.explain:
            return try encode(try await engine.explain(client: client, r.decodeParams(ExplainParams.self)))
        case NotificationMethod.getSettings:
            return try encode(try await engine.settings(client: client, r.decodeParams(SettingsParams.self)))
        case NotificationMethod.setSettings:
            return try encode(try await engine.setSettings(client: client, r.decodeParams(SettingsParams.self)))
        case NotificationMethod.focusSet:
            return try encode(try await engine.setFocus(client: client, r.decodeParams(FocusSetParams.self)))
        case NotificationMethod.focusStatus:
            _ = try r.decodeParams(StatusParams.self)
            return try encode(await engine.focusStatus())
        default:
            throw WireError(.unknownMethod, "no method \"\(r.method)\"")
        }
    }
}

/// An identity set once, right after the object it names is made (for a closure given to its init).
private final class IdentityBox: @unchecked Sendable {
    private let lock = NSLock()
    private var _id: ObjectIdentifier?
    var id: ObjectIdentifier? {
        get { lock.withLock { _id } }
        set { lock.withLock { _id = newValue } }
    }
}

/// The server's handlers as the daemon stops (``SocketServer/shutDown(timeout:)``): how many are
/// still deciding requests, and a gate where each finished one waits, still the engine's client,
/// until all are done (or the stop gives up waiting). Before the stop the gate is open.
final class StopGate: @unchecked Sendable {
    private let lock = NSLock()
    private var running = 0
    private var closed = false
    private var doneWaiters: [CheckedContinuation<Void, Never>] = []
    private var allDoneWaiters: [CheckedContinuation<Void, Never>] = []

    func handlerStarted() { lock.withLock { running += 1 } }

    /// A handler has answered its last request: waits while the daemon is stopping and others are not done.
    func handlerDone() async {
        await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
            var wake: [CheckedContinuation<Void, Never>] = []
            let now: Bool = lock.withLock {
                running -= 1
                if running == 0 { swap(&wake, &allDoneWaiters) }
                if !closed { return true }
                doneWaiters.append(k)
                return false
            }
            for w in wake { w.resume() }
            if now { k.resume() }
        }
    }

    /// Closes the gate (the daemon is stopping): a handler done from now on waits at it.
    func close() { lock.withLock { closed = true } }

    /// Returns once every handler is done.
    func allHandlersDone() async {
        await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if running == 0 { return true }
                allDoneWaiters.append(k)
                return false
            }
            if now { k.resume() }
        }
    }

    /// Opens the gate: the handlers waiting at it go on.
    func open() {
        let waiters: [CheckedContinuation<Void, Never>] = lock.withLock {
            closed = false
            defer { doneWaiters = [] }
            return doneWaiters
        }
        for w in waiters { w.resume() }
    }
}
