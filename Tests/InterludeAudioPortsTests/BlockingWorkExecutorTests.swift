import Dispatch
import Foundation
import InterludeAudioPorts
import Testing

/// The sound player's executor (issue 9): blocking work runs on a thread of its own, in order.
@Suite struct BlockingWorkExecutorTests {
    actor Worker {
        nonisolated let executor: BlockingWorkExecutor
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
        var order: [Int] = []
        init(_ executor: BlockingWorkExecutor) { self.executor = executor }
        /// Blocks its thread until `gate` opens, as a sample upload waiting for the server does.
        func block(_ gate: DispatchSemaphore, tag: Int) -> String? {
            gate.wait()
            gate.signal()  // the next job passes too
            order.append(tag)
            // The kernel's name of this thread (/proc), not Foundation's `Thread.current.name`:
            // that answered with a dispatch worker's name while other suites started and ended
            // threads in parallel.
            return (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?
                .trimmingCharacters(in: .newlines)
        }
    }

    /// The jobs run on the executor's own thread (its name), one after another in order, and while
    /// one is blocked the pool still runs other tasks. No timing: a bound on how fast the pool
    /// answers failed whenever other suites ran in parallel on the two cores.
    @Test func blockingJobsRunOnTheExecutorsThreadInOrderWhileThePoolStaysFree() async throws {
        let executor = BlockingWorkExecutor(name: "test.blocking")
        let worker = Worker(executor)
        let gate = DispatchSemaphore(value: 0)
        // Three jobs that block until the gate opens, queued at once.
        let jobs = (0..<3).map { i in Task { await worker.block(gate, tag: i) } }
        // Meanwhile the pool runs other tasks (a job on the pool would hold one of its threads).
        for _ in 0..<20 { await Task { }.value }
        gate.signal()
        var names: [String?] = []
        for j in jobs { names.append(await j.value) }
        #expect(names.allSatisfy { $0 == "test.blocking" }, "\(names)")
        #expect(await worker.order.sorted() == [0, 1, 2])
    }
}
