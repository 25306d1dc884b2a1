import CInterludeSys
import Foundation
import InterludeEngine
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One of the few loops that serve the connections (issue 9): its thread waits in `epoll_wait`
/// for their sockets, reads them, and runs their request handlers' jobs (each connection's
/// ``ConnectionExecutor`` is its handler's task executor, SE-0417).
///
/// A request from a client waiting for each reply wakes one thread on its way in, by the kernel,
/// when its bytes arrive: the handler runs on that thread, the engine's decision too
/// (``EngineExecutor`` runs a job on the thread that enqueues it when the engine is free), then
/// the store's commit (the group commit's leader) and the reply. Served by libdispatch (a read
/// source, the connection's queue on the global queue), a request woke two threads
/// (libdispatch's event thread, then a pool thread) and cost about 40 µs more of system time:
/// one waiting client's `focus.status` round trip went from 0.10–0.12 ms to 0.04–0.06 ms
/// (README "What the numbers say").
///
/// There are as many loops as cores (2 to 8), shared by every connection of the process: a
/// connection is given one when it is made, in turn. A thread per connection (or a queue per
/// connection on the overcommitting root queue) made 260 threads for 256 busy connections, each
/// with a malloc arena whose memory stayed (issue 7 hole 6).
///
/// Jobs of the engine's audio lane priority (``EngineExecutor/audioLanePriority``: a
/// `session.activate`'s reply) run before the others waiting; the others in the order they came.
/// Reading is checked between every few jobs, so a connection's burst does not hold another's
/// bytes unread.
///
/// A thread about to block for the disk (the store's commit, led by the thread that decided it:
/// ``BlockingWork``) first hands the loop to another of the loop's threads (leader/followers):
/// the other connections of its loop, a `session.activate` among them, do not wait for the
/// commit. A loop has at most ``maxThreads`` threads, made when first needed; one serves at a
/// time, the others wait for their turn. (The thread woken to take over runs while the commit
/// waits for the disk: it is not on the committing client's round trip.)
final class ConnectionLoop: BlockingHandOff, @unchecked Sendable {
    /// The most threads one loop has: one serving, the others blocked in a commit or waiting.
    static let maxThreads = 4

    /// The process's loops, one per core (2 to 8), started on first use.
    static let shared: [ConnectionLoop] = {
        let n = max(2, min(8, ProcessInfo.processInfo.activeProcessorCount))
        return (0..<n).map { ConnectionLoop(name: "interlude.io\($0)") }
    }()
    private static let nextLoop = Atomic<Int>(0)
    private static let tokens = Atomic<UInt64>(1)

    /// The loop for a new connection: each in turn.
    static func next() -> ConnectionLoop {
        let i = nextLoop.wrappingAdd(1, ordering: .relaxed).oldValue
        return shared[i % shared.count]
    }

    /// A token for a new connection's socket, unique in the process (0 is the loop's wake-up).
    static func newToken() -> UInt64 { tokens.wrappingAdd(1, ordering: .relaxed).oldValue }

    /// What a loop runs: a connection's job on that connection's executor, or a call.
    private enum Work {
        case job(UnownedJob, UnownedTaskExecutor)
        case call(@Sendable () -> Void)
    }

    // `@unchecked Sendable`: `audio`, `other`, `readers` and `sleeping` are touched only under
    // `lock`; `threads`, `waitingForTurn` and `server` under `turn`; `epfd`, `wake` and `name`
    // are set once.
    private let lock = NSLock()
    private var audio = RingQueue<Work>()
    private var other = RingQueue<Work>()
    /// What to call when a socket has bytes, by its token.
    private var readers: [UInt64: @Sendable () -> Void] = [:]
    /// Whether the thread waits in `epoll_wait` without end (then new work wakes it).
    private var sleeping = false
    private let epfd: Int32
    private let wake: Int32
    private let name: String
    /// Whose turn it is to serve the loop, and the threads waiting for theirs.
    private let turn = NSCondition()
    private var threads = 0
    private var waitingForTurn = 0
    /// The thread serving the loop now (its `pthread_t`; 0: none), also read without `turn`
    /// by the serving thread itself, after each job, to see whether it handed the loop over.
    private let server = Atomic<UInt>(0)

    private init(name: String) {
        self.name = name
        epfd = interlude_epoll_create()
        wake = interlude_eventfd()
        precondition(epfd >= 0 && wake >= 0, "epoll_create1 or eventfd failed (errno \(errno))")
        precondition(interlude_epoll_watch(epfd, wake, 0, 1) == 0, "epoll_ctl failed (errno \(errno))")
        turn.withLock { startThreadLocked() }
    }

    private func startThreadLocked() {
        threads += 1
        let thread = Thread { [unowned self] in
            _ = interlude_name_this_thread(name)
            BlockingWork.setHandOffForThisThread(self)
            takeTurns()
        }
        thread.name = name
        thread.start()
    }

    /// A thread of the loop: serves it when no other does, until it hands it over.
    private func takeTurns() {
        let me = UInt(pthread_self())
        while true {
            turn.lock()
            waitingForTurn += 1
            while server.load(ordering: .acquiring) != 0 { turn.wait() }
            waitingForTurn -= 1
            server.store(me, ordering: .releasing)
            turn.unlock()
            serve(as: me)
        }
    }

    /// Hands the loop to another of its threads (one waiting for its turn, or a new one), when
    /// the calling thread serves it: called before it blocks (``BlockingWork``).
    func willBlock() {
        let me = UInt(pthread_self())
        guard server.load(ordering: .acquiring) == me else { return }
        turn.lock()
        server.store(0, ordering: .releasing)
        if waitingForTurn > 0 {
            turn.signal()
        } else if threads < Self.maxThreads {
            startThreadLocked()
        }  // else: the first thread back from its wait serves it
        turn.unlock()
    }

    /// Runs `job` on this loop, on `executor` (a connection's).
    func enqueue(_ job: UnownedJob, on executor: UnownedTaskExecutor, priority: TaskPriority) {
        submit(.job(job, executor), audioLane: priority.rawValue >= EngineExecutor.audioLanePriority.rawValue)
    }

    /// Runs `body` on this loop, after the work queued before it.
    func call(_ body: @escaping @Sendable () -> Void) { submit(.call(body), audioLane: false) }

    private func submit(_ work: Work, audioLane: Bool) {
        lock.lock()
        if audioLane { audio.push(work) } else { other.push(work) }
        let poke = sleeping
        sleeping = false
        lock.unlock()
        if poke {
            var one: UInt64 = 1
            _ = withUnsafeBytes(of: &one) { Glibc.write(wake, $0.baseAddress, 8) }
        }
    }

    /// Calls `onReadable` on this loop whenever socket `fd` (token `token`) has bytes or was shut,
    /// while watched (``watch(_:token:)``), until ``forget(token:then:)``.
    func register(token: UInt64, onReadable: @escaping @Sendable () -> Void) {
        lock.withLock { readers[token] = onReadable }
    }

    /// Watches socket `fd` (registered as `token`) for bytes, or stops watching it. Level-triggered:
    /// bytes left unread are reported again.
    func watch(_ fd: Int32, token: UInt64, _ on: Bool) {
        _ = interlude_epoll_watch(epfd, fd, token, on ? 1 : 0)
    }

    /// Stops calling the socket's `onReadable` (it must be watched no more), then calls `then` on
    /// this loop, once no event already taken for it can reach it: the socket may be closed then.
    func forget(token: UInt64, then: @escaping @Sendable () -> Void) {
        call { [self] in
            lock.withLock { _ = readers.removeValue(forKey: token) }
            then()
        }
    }

    /// Serves the loop (jobs, then the sockets) until the thread hands it over.
    private func serve(as me: UInt) {
        var ready = [UInt64](repeating: 0, count: 64)
        while true {
            // Up to 16 jobs, audio first, then a look at the sockets.
            var ran = 0
            while ran < 16, let work = nextWork() {
                ran += 1
                switch work {
                case let .job(job, executor): job.runSynchronously(on: executor)
                case let .call(body): body()
                }
                // The job blocked (a commit) and handed the loop over meanwhile.
                if server.load(ordering: .acquiring) != me { return }
            }
            let idle: Bool = lock.withLock {
                if audio.count == 0 && other.count == 0 { sleeping = true; return true }
                return false
            }
            let n = ready.withUnsafeMutableBufferPointer { interlude_epoll_wait(epfd, $0.baseAddress, 64, idle ? -1 : 0) }
            if idle { lock.withLock { sleeping = false } }
            guard n > 0 else { continue }  // EINTR, or nothing ready
            var handlers: [@Sendable () -> Void] = []
            lock.withLock {
                for token in ready[0..<Int(n)] where token != 0 {
                    if let h = readers[token] { handlers.append(h) }
                }
            }
            if ready[0..<Int(n)].contains(0) {
                var count: UInt64 = 0
                _ = withUnsafeMutableBytes(of: &count) { Glibc.read(wake, $0.baseAddress, 8) }
            }
            for h in handlers { h() }
        }
    }

    private func nextWork() -> Work? {
        lock.withLock { audio.pop() ?? other.pop() }
    }
}

/// A connection's request handler's task executor: its jobs run on the connection's loop
/// (``ConnectionLoop``), which also reads its socket. Reading is turned on and off through it
/// (``ReadSwitch``, under the connection's lock).
final class ConnectionExecutor: TaskExecutor, @unchecked Sendable {
    let loop: ConnectionLoop
    private let fd: Int32
    private let token = ConnectionLoop.newToken()
    private let onReadable: @Sendable () -> Void
    private let readingEnded: @Sendable () -> Void
    /// Whether the socket is registered with the loop (on the first ``setReading(_:)``).
    private let registered = Atomic<Bool>(false)

    /// An executor on the next loop for socket `fd`: `onReadable` runs on the loop when it has
    /// bytes while reading is on; `readingEnded` runs on it once after ``cancelReading()``, when no
    /// read can come any more.
    init(fd: Int32, onReadable: @escaping @Sendable () -> Void, readingEnded: @escaping @Sendable () -> Void) {
        self.loop = ConnectionLoop.next()
        self.fd = fd
        self.onReadable = onReadable
        self.readingEnded = readingEnded
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let priority = job.priority
        loop.enqueue(UnownedJob(job), on: asUnownedTaskExecutor(), priority: TaskPriority(rawValue: priority.rawValue))
    }

    /// Watches the socket (true) or not (false). Called by ``ReadSwitch`` only: on after off,
    /// off after on.
    func setReading(_ on: Bool) {
        if on, !registered.exchange(true, ordering: .acquiringAndReleasing) {
            loop.register(token: token, onReadable: onReadable)
        }
        loop.watch(fd, token: token, on)
    }

    /// Stops reading for good (`wasOn`: the socket is watched now); `readingEnded` then runs on
    /// the loop. Called by ``ReadSwitch`` only, once.
    func cancelReading(wasOn: Bool) {
        if wasOn { loop.watch(fd, token: token, false) }
        loop.forget(token: token, then: readingEnded)
    }
}
