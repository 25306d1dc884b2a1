import CInterludeSys
import Foundation
import InterludeEngine

/// A serial executor on a thread of its own, for an actor whose work blocks: libsndfile decoding
/// (S1) and the sample cache's upload, play and remove calls (S3), which wait for the audio server
/// (up to `PulseConnection.operationTimeout`). Run on Swift's pool, each such call held one of its
/// few threads (two on this machine) for its length, and every other task of the daemon waited
/// (issue 9: no blocking PulseAudio call from the pool). Jobs run one at a time, in the order they
/// came; the thread sleeps when there is none (no wake-ups when idle).
///
/// One executor serves the process (``shared``): the daemon has one sound player.
public final class BlockingWorkExecutor: SerialExecutor, @unchecked Sendable {
    /// The process's executor for blocking audio work (its thread starts with the first job).
    public static let shared = BlockingWorkExecutor(name: "interlude.sound")

    // `@unchecked Sendable`: `jobs` and `started` are only touched under `condition`.
    private let condition = NSCondition()
    private var jobs = ExecutorJobQueue()
    private var started = false
    private let name: String

    /// An executor whose thread is called `name` (at most 15 bytes: the kernel keeps no longer
    /// thread name, and a longer one is not set at all).
    public init(name: String) { self.name = name }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.push(unowned)
        if !started {
            started = true
            // Named from inside, in the kernel: on Linux a name set before start is not
            // the thread's (it keeps the name of the thread that started it), and Foundation's
            // `Thread.current.name` setter reaches the kernel only once the starting thread has
            // stored the new thread's handle, which it may not have yet (about one start in 30,
            // under load, kept the pool thread's name "oot.default-qos").
            let thread = Thread { [self] in
                _ = interlude_name_this_thread(name)
                run()
            }
            thread.start()
        }
        condition.signal()
        condition.unlock()
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    private func run() {
        let executor = asUnownedSerialExecutor()
        while true {
            condition.lock()
            var next = jobs.pop()
            while next == nil {
                condition.wait()
                next = jobs.pop()
            }
            condition.unlock()
            let job = next!
            job.runSynchronously(on: executor)
        }
    }
}
