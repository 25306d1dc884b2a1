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
    let maxOutputBytes: Int
    let log: @Sendable (String) -> Void
    private var listenFD: Int32 = -1
    private var acceptSource: DispatchSourceRead?
    private let queue = DispatchQueue(label: "interlude.server")
    private var open = 0

    /// The socket path: `--socket`, else `INTERLUDE_SOCKET`, else `$XDG_RUNTIME_DIR/interlude/socket`
    /// (or `/tmp/interlude-UID/socket` without XDG_RUNTIME_DIR).
    public static func defaultPath(flag: String?, environment: [String: String]) -> String {
        if let flag { return flag }
        if let env = environment["INTERLUDE_SOCKET"], !env.isEmpty { return env }
        if let run = environment["XDG_RUNTIME_DIR"], !run.isEmpty { return run + "/interlude/socket" }
        return "/tmp/interlude-\(getuid())/socket"
    }

    public init(path: String, engine: Engine, maxClients: Int = 256, maxOutputBytes: Int = 1 << 20,
                log: @escaping @Sendable (String) -> Void) {
        self.path = path; self.engine = engine; self.maxClients = maxClients; self.maxOutputBytes = maxOutputBytes; self.log = log
    }

    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Creates the folder (0700) and socket (0600), refusing to steal a live daemon's socket.
    /// - Throws: ``StartError`` naming the path and the system error.
    public func start() throws {
        let dir = (path as NSString).deletingLastPathComponent
        if mkdir(dir, 0o700) != 0 && errno != EEXIST {
            throw StartError(description: "cannot create \(dir): \(String(cString: strerror(errno)))")
        }
        if FileManager.default.fileExists(atPath: path) {
            if SocketServer.isLive(path) { throw StartError(description: "another daemon is listening on \(path)") }
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw StartError(description: "socket: \(String(cString: strerror(errno)))") }
        let rc: Int32
        do { rc = try UnixSocket.attach(fd, to: path, listen: true) } catch {
            close(fd); throw StartError(description: "\(error)")
        }
        guard rc == 0 else { close(fd); throw StartError(description: "bind \(path): \(String(cString: strerror(errno)))") }
        chmod(path, 0o600)
        guard listen(fd, 64) == 0 else { close(fd); throw StartError(description: "listen: \(String(cString: strerror(errno)))") }
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

    /// Stops accepting and removes the socket file. The listening socket is closed when its
    /// dispatch source has been cancelled.
    public func stop() {
        queue.sync {
            if let source = acceptSource {
                source.cancel()
                acceptSource = nil
            } else if listenFD >= 0 {
                close(listenFD)
            }
            listenFD = -1
        }
        unlink(path)
    }

    /// Whether a daemon answers on the socket at `path`.
    public static func isLive(_ path: String) -> Bool { UnixSocket.isLive(path) }

    private func connectionClosed() { queue.async { self.open -= 1 } }

    private func acceptAll() {
        while listenFD >= 0 {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 { return }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var pid: Int32 = 0, uid: UInt32 = 0, gid: UInt32 = 0
            let credOK = interlude_peer_credentials(fd, &pid, &uid, &gid) == 0
            let conn = Connection(fd: fd, pid: pid, maxOutputBytes: maxOutputBytes, log: log)
            conn.start()
            conn.send(.greeting(Greeting(version: engine.version)))
            guard credOK, uid == geteuid() else {
                log("refused a client of uid \(uid) (pid \(pid)): not ours")
                conn.send(.reply(WireReply(id: nil, error: WireError(.notAuthorized, "peer uid \(uid) is not the daemon's uid \(geteuid())"))))
                conn.closeWhenFlushed()
                continue
            }
            guard open < maxClients else {
                conn.send(.reply(WireReply(id: nil, error: WireError(.rateLimited, "too many connections (\(maxClients))"))))
                conn.closeWhenFlushed()
                continue
            }
            open += 1
            conn.onClose = { [weak self] in self?.connectionClosed() }
            let engine = self.engine
            let log = self.log
            Task {
                let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
                let client = await engine.connect(pid: pid, executable: exe) { [weak conn] event in conn?.send(.event(event)) }
                await RequestHandler(engine: engine, client: client, connection: conn, log: log).run()
                await engine.disconnect(client: client)
            }
        }
    }
}

/// Serves one connection's requests, in order.
struct RequestHandler {
    let engine: Engine
    let client: Int
    let connection: Connection
    let log: @Sendable (String) -> Void

    func run() async {
        var greeted = false
        for await line in connection.lines {
            let request: WireRequest
            do { request = try WireRequest.parse(line) } catch {
                connection.send(.reply(WireReply(id: error.id, error: error.error)))
                continue
            }
            if !greeted && request.method != WireMethod.hello {
                connection.send(.reply(WireReply(id: request.id, error: WireError(.helloRequired, "the first request must be hello"))))
                continue
            }
            do {
                let result = try await dispatch(request)
                if request.method == WireMethod.hello { greeted = true }
                connection.send(.reply(WireReply(id: request.id, result: result)))
            } catch {
                connection.send(.reply(WireReply(id: request.id, error: error)))
            }
        }
    }

    /// Maps one request to the engine. Params are validated (unknown fields refused) before any
    /// side effect.
    func dispatch(_ r: WireRequest) async throws(WireError) -> JSONValue {
        func encode<T: Encodable>(_ v: T) throws(WireError) -> JSONValue {
            do { return try JSONValue(encoding: v) } catch { throw WireError(.internalError, "cannot encode result") }
        }
        let empty = JSONValue.object([:])
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
            try await engine.setRinger(silent: p.mode == "silent")
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
