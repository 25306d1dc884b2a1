import Dispatch
import Foundation
import InterludeEngine
import InterludePolicy
import InterludeClient
import InterludeConfig
import InterludeServer
import InterludeTestSupport
import InterludeWire
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
        /// Records `tag` after calling `probe` in the job.
        func record(_ tag: String, probing probe: @Sendable () -> Void) {
            probe()
            order.append(tag)
        }
        /// Asks for `body` (or `otherwise`) after the release, from the job running, and returns
        /// whether it was kept; then holds the thread until `gate` (nil: at once).
        func askAfterRelease(_ body: @escaping @Sendable () -> Void, otherwise: @escaping @Sendable () -> Void,
                             holding gate: DispatchSemaphore? = nil, inJob: (@Sendable () -> Void)? = nil) -> Bool {
            inJob?()
            let kept = executor.runAfterRelease(body, otherwise: otherwise)
            gate?.wait()
            return kept
        }
    }

    /// Runs a task's jobs on a serial queue of its own (a thread outside Swift's pool): the job
    /// that holds the engine blocks that thread, not one of the pool's (two on this machine).
    /// With both tests of this suite run in parallel, each holding a pool thread, the pool had
    /// none left for the test bodies that open the gates: `swift test` without `--no-parallel`
    /// hung at 0 % CPU.
    final class HolderThread: TaskExecutor, @unchecked Sendable {
        let queue = DispatchQueue(label: "interlude.test.holder")
        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    /// Starts the job that holds `r`'s executor until `gate` is signalled, enqueued from (and so
    /// run on, ``EngineExecutor`` runs a job on the thread that enqueues it when free) a
    /// ``HolderThread``.
    func holder(_ r: Recorder, _ gate: DispatchSemaphore) -> Task<Void, Never> {
        Task(executorPreference: HolderThread(), priority: .medium) { await r.hold(gate) }
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
        let holder = holder(r, gate)
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
        let holder = holder(r, gate)
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

    /// The leader of a group commit (issue 9): work asked for by a job runs on that job's thread
    /// once the engine is free, so a job it starts there runs at once, on the same thread.
    @Test func workAskedForAfterTheReleaseRunsOnTheJobsThreadOnceTheEngineIsFree() async throws {
        let executor = EngineExecutor()
        let r = Recorder(executor)
        let seen = LockedBox<(jobThread: pthread_t?, bodyThread: pthread_t?, ranAtOnce: Bool?, otherwise: Int)>((nil, nil, nil, 0))
        let kept = await Task(executorPreference: HolderThread(), priority: .medium) {
            await r.askAfterRelease({
                seen.withLock { $0.bodyThread = pthread_self() }
                // The engine is free: a job that hops onto it from here runs before `immediate` returns.
                let returned = LockedBox(false)
                Task.immediate {
                    await r.record("from the body") {
                        let early = !returned.withLock { $0 }
                        seen.withLock { $0.ranAtOnce = early }
                    }
                }
                returned.withLock { $0 = true }
            }, otherwise: { seen.withLock { $0.otherwise += 1 } }, inJob: { seen.withLock { $0.jobThread = pthread_self() } })
        }.value
        #expect(kept)
        let s = seen.withLock { $0 }
        #expect(s.bodyThread != nil, "the body ran before the job's task finished")
        #expect(s.jobThread.flatMap { job in s.bodyThread.map { pthread_equal(job, $0) != 0 } } == true, "the body ran on the job's thread")
        #expect(s.ranAtOnce == true, "the engine was free when the body ran")
        #expect(s.otherwise == 0)
        #expect(await r.order == ["from the body"])
    }

    /// Asked for from a thread that is not running the engine's jobs: refused, neither is kept.
    @Test func workAskedForOffTheEnginesThreadIsRefused() {
        let executor = EngineExecutor()
        let ran = LockedBox(0)
        let kept = executor.runAfterRelease({ ran.withLock { $0 += 1 } }, otherwise: { ran.withLock { $0 += 1 } })
        #expect(!kept)
        #expect(ran.withLock { $0 } == 0)
    }

    /// Asked for from an audio-lane job: refused (its thread goes on to answer an audio request,
    /// which must not wait for a commit); a notification-lane job's is kept.
    @Test func workAskedForFromAnAudioJobIsRefused() async throws {
        let executor = EngineExecutor()
        let r = Recorder(executor)
        let ran = LockedBox(0)
        let audio = await Task(executorPreference: HolderThread(), priority: EngineExecutor.audioLanePriority) {
            await r.askAfterRelease({ ran.withLock { $0 += 1 } }, otherwise: { ran.withLock { $0 += 1 } })
        }.value
        #expect(!audio && ran.withLock { $0 } == 0)
        let other = await Task(executorPreference: HolderThread(), priority: .low) {
            await r.askAfterRelease({ ran.withLock { $0 += 1 } }, otherwise: { ran.withLock { $0 += 100 } })
        }.value
        #expect(other && ran.withLock { $0 } == 1)
    }

    /// If a job queues before the engine is free (a burst), `otherwise` runs instead, before that
    /// job, and the body never: the thread is not free soon, the work goes elsewhere.
    @Test func workAskedForIsHandedOffWhenAJobQueuesFirst() async throws {
        let executor = EngineExecutor()
        let r = Recorder(executor)
        let gate = DispatchSemaphore(value: 0)
        let order = LockedBox<[String]>([])
        let asking = Task(executorPreference: HolderThread(), priority: .medium) {
            await r.askAfterRelease({ order.withLock { $0.append("body") } },
                                    otherwise: { order.withLock { $0.append("otherwise") } }, holding: gate)
        }
        while executor.jobsRun.other == 0 { try await Task.sleep(nanoseconds: 1_000_000) }
        let queued = Task(priority: .low) {
            await r.record("queued")
            order.withLock { $0.append("queued job") }
        }
        try await waitQueued(executor, 1)
        gate.signal()
        #expect(await asking.value)
        await queued.value
        #expect(order.withLock { $0 } == ["otherwise", "queued job"])
    }
}

/// Which lane a connection's requests take on a real socket (issue 9: an audio app's requests
/// are decided before a notification burst's queued work).
@Suite(.serialized) struct ConnectionLaneTests {
    @Test func audioRequestsTakeTheAudioLaneAndNoOtherRequestDoes() async throws {
        let executor = EngineExecutor()
        let dir = NSTemporaryDirectory() + "interlude-lanes-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = try ConfigLoader.load(folders: [], overlay: nil)
        let engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: FakeSoundPlayer(), store: MemoryNotificationStore(),
                                version: "test", executor: executor)
        let server = SocketServer(path: dir + "/socket", engine: engine, log: { _ in })
        try server.start()
        defer { server.stop() }

        let user = try await InterludeClient.connect(socket: dir + "/socket", app: "org.interlude.CLI")
        defer { user.close() }
        var grant = SettingsParams(app: "org.example.Chat")
        grant.authorization = .authorized
        _ = try await user.call(NotificationMethod.setSettings, grant, as: NotificationAppSettings.self)
        let chat = try await InterludeClient.connect(socket: dir + "/socket", app: "org.example.Chat")
        defer { chat.close() }
        _ = try await chat.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]), as: AuthorizationResult.self)
        _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "a", title: "hi"), as: AddNotificationResult.self)
        #expect(executor.jobsRun.audio == 0, "a notification app's requests stay below the audio lane")

        let music = try await InterludeClient.connect(socket: dir + "/socket", app: "org.example.Music")
        defer { music.close() }
        let session = try await music.register(category: .playback)
        _ = try await music.activate(session)
        let afterActivate = executor.jobsRun.audio
        #expect(afterActivate >= 2, "register and activate ran in the audio lane")
        // The lane is the request's, not the connection's: the audio app's other requests (a
        // status, a flood of its own notifications) stay below it, its next audio request takes it.
        _ = try await music.status()
        grant.app = "org.example.Music"
        _ = try await user.call(NotificationMethod.setSettings, grant, as: NotificationAppSettings.self)
        _ = try await music.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]), as: AuthorizationResult.self)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask {
                    _ = try await music.call(NotificationMethod.add, AddNotificationParams(identifier: "m\(i)", title: "track \(i)"),
                                             as: AddNotificationResult.self)
                }
            }
            try await group.waitForAll()
        }
        #expect(executor.jobsRun.audio == afterActivate, "an audio app's status and notifications run below the audio lane")
        try await music.deactivate(session)
        #expect(executor.jobsRun.audio > afterActivate, "the audio app's next audio request takes the lane again")

        let before = executor.jobsRun.audio
        _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "b", title: "again"), as: AddNotificationResult.self)
        #expect(executor.jobsRun.audio == before, "the notification app's connection is not lifted by another's")
    }
}
