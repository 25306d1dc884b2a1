import CInterludeSys
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A child process for tests and their helpers: started with `posix_spawn`, its exit read with
/// `waitpid` on its own pid.
///
/// Why not Foundation's `Process`: on Linux it notices a child's exit when a socket pair end
/// given to the child closes. That end is not close-on-exec, and Foundation closes in a new child
/// only the descriptors it found open before it spawned; a `Process` started from another thread
/// in the same instant can inherit the first one's end, and the first child's exit then goes
/// unseen until the second child exits (swift-corelibs-foundation issue 4795 describes the same
/// mechanism with grandchildren). `waitUntilExit` hung for good in RemoteEndToEndTests' SIGKILL
/// test, whose pusher thread starts `interlude push` while the test's thread restarts the daemon:
/// the last push stayed a zombie while the daemon that held its end kept running.
///
/// Here every descriptor this type opens is close-on-exec, the child keeps only 0, 1 and 2
/// (everything from 3 up is closed in it), and the exit is read by `waitpid` on the pid.
public final class ChildProcess: Sendable {
    /// What the child reads on standard input.
    public enum Input: Sendable {
        /// `/dev/null`.
        case null
        /// This process's standard input.
        case inherit
        /// These bytes, then end of file (written from a thread of their own, so a child that
        /// writes before it reads does not deadlock with us).
        case bytes([UInt8])
    }

    /// Where the child's standard output or error goes.
    public enum Output: Sendable {
        /// `/dev/null`.
        case null
        /// This process's descriptor.
        case inherit
        /// A pipe read to its end by a thread of ours: ``output()`` and ``errorOutput()``.
        case capture
        /// The end of a file, created (0600) if missing: a log kept across restarts.
        case appendTo(String)
    }

    /// How a child ended.
    public enum Exit: Equatable, Sendable, CustomStringConvertible {
        /// It called exit with this status (0…255).
        case exited(Int32)
        /// A signal ended it (its number).
        case signaled(Int32)

        /// The exit status, or nil when a signal ended it.
        public var status: Int32? { if case .exited(let s) = self { s } else { nil } }
        public var description: String {
            switch self {
            case .exited(let s): "exit status \(s)"
            case .signaled(let s): "killed by signal \(s)"
            }
        }
    }

    /// A child that could not be started.
    public struct SpawnError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The child's process id.
    public let pid: pid_t
    private let exit = Mutex<Exit?>(nil)
    private let stdoutReader: PipeReader?
    private let stderrReader: PipeReader?

    /// Starts `path` with `arguments` (argv[0] is `path`).
    /// - Parameter environment: the child's environment; nil: this process's.
    /// - Throws: ``SpawnError`` when a pipe cannot be made or `posix_spawn` fails (the message
    ///   names the path and the reason).
    public init(_ path: String, _ arguments: [String], stdin: Input = .null, stdout: Output = .inherit,
                stderr: Output = .inherit, environment: [String: String]? = nil) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentEnds: [Int32] = []     // closed in this process after the spawn
        var childEnds: [Int32] = []      // closed in this process after the spawn
        func pipeEnds() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            guard interlude_pipe_cloexec(&fds) == 0 else {
                throw SpawnError(description: "cannot start \(path): pipe: \(String(cString: strerror(errno)))")
            }
            return (fds[0], fds[1])
        }
        var stdinWriter: (fd: Int32, bytes: [UInt8])?
        switch stdin {
        case .null: posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        case .inherit: break
        case .bytes(let bytes):
            let p = try pipeEnds()
            posix_spawn_file_actions_adddup2(&actions, p.read, 0)
            childEnds.append(p.read)
            stdinWriter = (p.write, bytes)
        }
        var readers: [Int32: Int32] = [:]   // child fd → our read end
        for (fd, output) in [(Int32(1), stdout), (Int32(2), stderr)] {
            switch output {
            case .null: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0)
            case .inherit: break
            case .appendTo(let file): posix_spawn_file_actions_addopen(&actions, fd, file, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            case .capture:
                let p = try pipeEnds()
                posix_spawn_file_actions_adddup2(&actions, p.write, fd)
                childEnds.append(p.write)
                parentEnds.append(p.read)
                readers[fd] = p.read
            }
        }
        _ = interlude_spawn_add_closefrom(&actions, 3)   // where missing, O_CLOEXEC above still holds for ours

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGINT, SIGTERM, SIGCHLD, SIGHUP] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for p in envp ?? [] { free(p) } }
        var pid: pid_t = 0
        let rc = envp.map { e in posix_spawn(&pid, path, &actions, &attributes, argv, e) }
            ?? posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        for fd in childEnds { close(fd) }
        guard rc == 0 else {
            for fd in parentEnds { close(fd) }
            if let w = stdinWriter { close(w.fd) }
            throw SpawnError(description: "cannot start \(path): \(String(cString: strerror(rc)))")
        }
        self.pid = pid
        stdoutReader = readers[1].map { PipeReader($0) }
        stderrReader = readers[2].map { PipeReader($0) }
        if let w = stdinWriter {
            let t = Thread {
                var offset = 0
                w.bytes.withUnsafeBytes { raw in
                    while offset < raw.count {
                        let n = Glibc.write(w.fd, raw.baseAddress! + offset, raw.count - offset)
                        if n < 0 { if errno == EINTR { continue }; break }   // EPIPE: the child stopped reading
                        offset += n
                    }
                }
                close(w.fd)
            }
            t.start()
        }
    }

    /// The exit, if the child has ended (reaps it; later calls return the same).
    public var exited: Exit? {
        exit.withLock { known in
            if let known { return known }
            var status: Int32 = 0
            var r: pid_t
            repeat { r = waitpid(pid, &status, WNOHANG) } while r < 0 && errno == EINTR
            guard r == pid else { return nil }
            let signal = status & 0x7f
            known = signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
            return known
        }
    }

    /// Whether the child has not ended yet.
    public var isRunning: Bool { exited == nil }

    /// Waits (polling every 5 ms) until the child ends, at most `timeout` seconds (nil: for ever).
    /// - Returns: its exit, or nil when it still runs at the deadline.
    @discardableResult
    public func wait(timeout: Double? = nil) -> Exit? {
        let deadline = timeout.map { Date().addingTimeInterval($0) }
        while true {
            if let e = exited { return e }
            if let deadline, Date() >= deadline { return nil }
            usleep(5_000)
        }
    }

    /// Sends `signal` to the child (nothing once it has been reaped: its pid may be another's).
    public func signal(_ signal: Int32) {
        exit.withLock { known in if known == nil { _ = Glibc.kill(pid, signal) } }
    }

    /// SIGKILL, then waits for the end.
    @discardableResult
    public func kill() -> Exit {
        signal(SIGKILL)
        return wait()!
    }

    /// SIGTERM; after `grace` seconds still running, SIGKILL. Returns the exit.
    @discardableResult
    public func stop(grace: Double = 5) -> Exit {
        signal(SIGTERM)
        if let e = wait(timeout: grace) { return e }
        return kill()
    }

    /// Everything the child wrote to a captured standard output, once it closed it (waits for
    /// that). Empty when standard output was not captured.
    public func output() -> String { stdoutReader?.text() ?? "" }

    /// Everything the child wrote to a captured standard error, once it closed it.
    public func errorOutput() -> String { stderrReader?.text() ?? "" }

    /// What ``run(_:_:stdin:timeout:environment:)`` returns.
    public struct Result: Sendable {
        /// How the child ended; ``Exit/signaled(_:)`` with SIGKILL when it outlived the timeout.
        public let exit: Exit
        public let stdout: String
        public let stderr: String
        /// The exit status, or 128 + the signal's number (as a shell says it).
        public var status: Int32 {
            switch exit { case .exited(let s): s; case .signaled(let s): 128 + s }
        }
    }

    /// Runs `path` to its end with `stdin` as input, capturing both outputs; SIGKILLs it after
    /// `timeout` seconds.
    /// - Throws: ``SpawnError`` when it cannot start.
    public static func run(_ path: String, _ arguments: [String], stdin: String? = nil, timeout: Double = 60,
                           environment: [String: String]? = nil) throws -> Result {
        try run(path, arguments, input: stdin.map { Array($0.utf8) }, timeout: timeout, environment: environment)
    }

    /// ``run(_:_:stdin:timeout:environment:)`` with standard input as bytes (which need not be
    /// UTF-8).
    public static func run(_ path: String, _ arguments: [String], input: [UInt8]?, timeout: Double = 60,
                           environment: [String: String]? = nil) throws -> Result {
        let child = try ChildProcess(path, arguments, stdin: input.map { .bytes($0) } ?? .null,
                                     stdout: .capture, stderr: .capture, environment: environment)
        let exit = child.wait(timeout: timeout) ?? child.kill()
        return Result(exit: exit, stdout: child.output(), stderr: child.errorOutput())
    }
}

/// Reads one pipe to its end on a thread of its own (a child that fills one pipe while we read
/// the other cannot stall).
private final class PipeReader: Sendable {
    private let data = Mutex<[UInt8]>([])
    private let done = DispatchSemaphore(value: 0)

    init(_ fd: Int32) {
        let t = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                data.withLock { $0.append(contentsOf: buffer[0..<n]) }
            }
            close(fd)
            done.signal()
        }
        t.start()
    }

    /// Waits for the end of the pipe; the bytes as UTF-8 (invalid bytes replaced).
    func text() -> String {
        done.wait()
        done.signal()   // later calls do not wait again
        return String(decoding: data.withLock { $0 }, as: UTF8.self)
    }
}
