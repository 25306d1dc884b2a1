import Dispatch
import Foundation
import InterludeEngine
import Testing

/// The engine's executor (issue 9 item 2): audio work is not queued behind notification work.
@Suite struct EngineExecutorTests {
    /// An actor on a given executor that records the order its jobs ran in.
    actor Recorder {
        nonisolated let executor: EngineExecutor
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
        var order: [String] = []
        init(_ executor: EngineExecutor) { self.executor = executor }
        /// Holds the thread running the executor's jobs until `gate` is signalled (the job running when others queue).
        func hold(_ gate: DispatchSemaphore) { gate.wait() }
        func record(_ tag: String) { order.append(tag) }
    }

    /// Waits (polling, at most 10 s) until the executor has `n` jobs queued in all.
    func waitQueued(_ e: EngineExecutor, _ n: Int) async throws {
        let deadline = Date().addingTimeInterval(10)
        while e.jobsQueued.audio + e.jobsQueued.other < n {
            guard Date() < deadline else { Issue.record("only \(e.jobsQueued) queued, want \(n)"); return }
            try await Task.sleep(nanoseconds: 1_000_000)
        }
    }

    @Test func anAudioJobRunsBeforeTheNotificationJobsQueuedAheadOfIt() async throws {
        let executor = EngineExecutor()
        let r = Recorder(executor)
        let gate = DispatchSemaphore(value: 0)
        let holder = Task(priority: .medium) { await r.hold(gate) }
        try await waitQueued(executor, 0)
        while executor.jobsRun.other == 0 { try await Task.sleep(nanoseconds: 1_000_000) }  // the holder is running
        // 20 notification-lane jobs queue behind the one running, then one audio job.
        var low: [Task<Void, Never>] = []
        for i in 0..<20 { low.append(Task(priority: .low) { await r.record("n\(i)") }) }
        try await waitQueued(executor, 20)
        let audio = Task(priority: EngineExecutor.audioLanePriority) { await r.record("audio") }
        try await waitQueued(executor, 21)
        #expect(executor.jobsQueued.audio == 1)
        gate.signal()
        await holder.value
        await audio.value
        for t in low { await t.value }
        let order = await r.order
        #expect(order.first == "audio", "ran in the order \(order)")
        #expect(order.count == 21)
        // Within a lane, first come, first served.
        #expect(order.dropFirst().map { Int($0.dropFirst())! } .sorted() == Array(0..<20))
    }

    @Test func jobsOfOneLaneRunInTheOrderTheyCame() async throws {
        let executor = EngineExecutor()
        let r = Recorder(executor)
        let gate = DispatchSemaphore(value: 0)
        let holder = Task(priority: .medium) { await r.hold(gate) }
        while executor.jobsRun.other == 0 { try await Task.sleep(nanoseconds: 1_000_000) }
        var tasks: [Task<Void, Never>] = []
        // Enqueued one by one (each waits until the one before is queued): a known arrival order,
        // more than the queue's first capacity (16) so that it grows while holding jobs.
        for i in 0..<40 {
            tasks.append(Task(priority: i % 2 == 0 ? .low : EngineExecutor.audioLanePriority) { await r.record("\(i)") })
            try await waitQueued(executor, i + 1)
        }
        gate.signal()
        await holder.value
        for t in tasks { await t.value }
        let order = await r.order.map { Int($0)! }
        let audio = stride(from: 1, to: 40, by: 2).map { $0 }, other = stride(from: 0, to: 40, by: 2).map { $0 }
        #expect(order == audio + other)
        #expect(executor.jobsRun.audio == 20)
    }
}
