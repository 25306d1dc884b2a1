import Foundation
import InterludeEngine
import Synchronization
import Testing
@testable import InterludeServer
#if canImport(Glibc)
import Glibc
#endif

/// The connections' loops (``ConnectionLoop``, issue 9): a connection's socket is read on its
/// loop and its request handler runs there too, so a waiting client's request wakes one thread;
/// audio-lane jobs go before the notification work waiting on the same loop.
@Suite struct ConnectionLoopTests {
    /// What runs on a loop, in order, with the thread it ran on.
    final class Trace: @unchecked Sendable {
        private let lock = NSLock()
        private var entries: [(String, String)] = []
        func add(_ s: String) {
            let thread = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
            lock.withLock { entries.append((s, thread.trimmingCharacters(in: .whitespacesAndNewlines))) }
        }
        var names: [String] { lock.withLock { entries.map(\.0) } }
        var threadNames: [String] { lock.withLock { entries.map(\.1) } }
    }

    /// A socket pair: [0] the connection's end, [1] the peer's.
    static func pair() -> [Int32] {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        return fds
    }

    /// A job of the engine's audio lane (a `session.activate`'s reply) enqueued after notification
    /// work on the same loop runs before it; the notification work keeps its order.
    @Test func audioLaneJobsRunBeforeTheOtherWorkWaitingOnTheLoop() async {
        let fds = Self.pair()
        let connection = Connection(fd: fds[0], pid: getpid(), limits: ConnectionLimits(), log: { _ in })
        defer { connection.close(); Glibc.close(fds[1]) }
        let loop = connection.taskExecutor.loop
        let trace = Trace()
        // Holds the loop until every task below is queued on it (signalled from this thread, not
        // after an await: Swift's pool may be busy with other suites for seconds).
        let gate = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        loop.call { held.signal(); gate.wait() }
        held.wait()
        var tasks: [Task<Void, Never>] = []
        for i in 0..<3 {
            tasks.append(Task(executorPreference: connection.taskExecutor, priority: .low) { trace.add("add \(i)") })
        }
        tasks.append(Task(executorPreference: connection.taskExecutor, priority: EngineExecutor.audioLanePriority) { trace.add("activate") })
        // The tasks' first jobs were queued on the loop when they were made: let the loop go at
        // once (the loop is every connection's in this process: it is held no longer than this).
        gate.signal()
        for t in tasks { await t.value }
        #expect(trace.names == ["activate", "add 0", "add 1", "add 2"])
    }

    /// A line that reaches a handler waiting for it is read on the connection's loop and the
    /// handler goes on there: no thread of Swift's pool is woken for it.
    @Test func aLineIsReadAndHandledOnTheConnectionsLoopThread() async {
        let fds = Self.pair()
        let connection = Connection(fd: fds[0], pid: getpid(), limits: ConnectionLimits(), log: { _ in })
        defer { connection.close(); Glibc.close(fds[1]) }
        connection.start()
        let trace = Trace()
        let handler = Task(executorPreference: connection.taskExecutor) {
            trace.add("waiting")
            let line = await connection.nextRequest()
            trace.add(String(decoding: line ?? [], as: UTF8.self))
        }
        try? await Task.sleep(nanoseconds: 20_000_000)
        let bytes = Array("hello\n".utf8)
        #expect(write(fds[1], bytes, bytes.count) == bytes.count)
        await handler.value
        #expect(trace.names == ["waiting", "hello"])
        // The loop's threads, not Swift's pool (a loop's thread that blocks in another
        // connection's commit hands the loop to another of its threads, so not always the same).
        #expect(trace.threadNames.count == 2 && trace.threadNames.allSatisfy { $0.hasPrefix("interlude.io") })
    }

    /// A socket whose reading ends is closed only once its loop has let go of it: the next socket,
    /// which gets the same number, is watched and read. (Closed before its loop stopped watching
    /// it, the late `EPOLL_CTL_DEL` on that number took the new socket off the loop, silently.)
    @Test func theNextSocketOnAClosedOnesNumberIsRead() {
        var sameNumber = 0
        for round in 0..<20 {
            let fds = Self.pair()
            let closed = DispatchSemaphore(value: 0)
            let old = ConnectionExecutor(fd: fds[0], onReadable: {}, readingEnded: { Glibc.close(fds[0]); closed.signal() })
            old.setReading(true)
            old.cancelReading(wasOn: true)
            #expect(closed.wait(timeout: .now() + 5) == .success)
            Glibc.close(fds[1])
            let next = Self.pair()
            defer { Glibc.close(next[0]); Glibc.close(next[1]) }
            guard next[0] == fds[0] || next[1] == fds[0] else { continue }  // taken by another suite meanwhile
            sameNumber += 1
            let read = DispatchSemaphore(value: 0)
            let mine = next[0] == fds[0] ? next[0] : next[1]
            let peer = mine == next[0] ? next[1] : next[0]
            let drained = Atomic<Bool>(false)
            let new = ConnectionExecutor(fd: mine, onReadable: {
                var b = [UInt8](repeating: 0, count: 64)
                _ = recv(mine, &b, b.count, Int32(MSG_DONTWAIT))
                if !drained.exchange(true, ordering: .relaxed) { read.signal() }
            }, readingEnded: {})
            new.setReading(true)
            // Later than any late unregistration of the old socket would come (a loop's turn).
            usleep(100_000)
            #expect(write(peer, "ping\n", 5) == 5)
            #expect(read.wait(timeout: .now() + 2) == .success, "round \(round): the socket on a reused number was not read")
            new.cancelReading(wasOn: true)
            if sameNumber == 3 { break }
        }
        #expect(sameNumber > 0, "no round got the closed socket's number")
    }

    /// A job that blocks for the disk (``BlockingWork``: the store's commit, led by the thread
    /// that decided it) hands its loop to another thread first: another connection of the same
    /// loop (an audio app's `session.activate`) is served meanwhile, not after the commit.
    @Test func aCommitOnALoopDoesNotHoldTheLoopsOtherConnections() async {
        let fds = Self.pair()
        let committing = Connection(fd: fds[0], pid: getpid(), limits: ConnectionLimits(), log: { _ in })
        defer { committing.close(); Glibc.close(fds[1]) }
        // Another connection on the same loop (connections are given the loops in turn).
        var others: [(Connection, [Int32])] = []
        defer { for (c, p) in others { c.close(); Glibc.close(p[1]) } }
        var other: Connection?
        while other == nil {
            let p = Self.pair()
            let c = Connection(fd: p[0], pid: getpid(), limits: ConnectionLimits(), log: { _ in })
            others.append((c, p))
            if c.taskExecutor.loop === committing.taskExecutor.loop { other = c }
        }
        let gate = DispatchSemaphore(value: 0)
        let blocked = DispatchSemaphore(value: 0)
        let commit = Task(executorPreference: committing.taskExecutor) {
            BlockingWork.run { blocked.signal(); gate.wait() }
        }
        blocked.wait()
        let served = Atomic<Bool>(false)
        let activation = Task(executorPreference: other!.taskExecutor, priority: EngineExecutor.audioLanePriority) {
            served.store(true, ordering: .releasing)
        }
        // Served while the commit still blocks (2 s at most; at once when the loop was handed over).
        let deadline = Date().addingTimeInterval(2)
        while !served.load(ordering: .acquiring), Date() < deadline { try? await Task.sleep(nanoseconds: 1_000_000) }
        let servedDuringTheCommit = served.load(ordering: .acquiring)
        #expect(servedDuringTheCommit, "the other connection waited for the commit")
        gate.signal()
        await commit.value
        await activation.value
    }
}
