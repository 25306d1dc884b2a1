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
        /// Blocks its thread for `seconds`, as a sample upload waiting for the server does.
        func block(_ seconds: Double, tag: Int) -> String? {
            Thread.sleep(forTimeInterval: seconds)
            order.append(tag)
            return Thread.current.name
        }
    }

    @Test func blockingJobsRunOnTheExecutorsThreadInOrderWhileThePoolStaysFree() async throws {
        let worker = Worker(BlockingWorkExecutor(name: "test.blocking"))
        // Three jobs that block 0.2 s each, queued at once.
        let jobs = (0..<3).map { i in Task { await worker.block(0.2, tag: i) } }
        // Meanwhile the pool answers at once (a job on the pool would have held one of its threads).
        let start = Date()
        for _ in 0..<20 { await Task { }.value }
        #expect(Date().timeIntervalSince(start) < 0.15, "pool tasks waited for the blocking jobs")
        var names: [String?] = []
        for j in jobs { names.append(await j.value) }
        #expect(names.allSatisfy { $0 == "test.blocking" }, "\(names)")
        #expect(await worker.order.sorted() == [0, 1, 2])
    }
}
