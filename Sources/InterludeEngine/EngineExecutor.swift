import Foundation

/// The engine's serial executor: jobs in two lanes, so that audio never waits behind
/// notification work (issue 9 item 2: "a call must never wait behind a disk write").
///
/// The engine is one actor: audio arbitration (A-rules) and notification delivery (N-rules) meet
/// there (a call silences notification sounds, a critical one is never ducked). A default actor
/// runs its jobs first come, first served: measured here, a high-priority job enqueued behind 200
/// low-priority ones ran last. Under a notification burst (8 clients × 16 `notification.add`s in
/// flight) a `session.activate` waited behind every queued decision (34× its idle round trip).
///
/// This executor takes jobs of priority ``audioLanePriority`` or above (the server's audio
/// requests, the audio server's stream events, the audio policy's timer, MPRIS players) before
/// any other job waiting, and the rest in the order they came. A job is never interrupted: an
/// audio job waits at most for the one job running (a batch of notification decisions; the
/// commit itself runs off the actor, on the store's thread).
///
/// Like a default actor it has no thread of its own: a job that finds the engine free runs at
/// once on the thread that enqueued it (a task hopping onto the engine from Swift's pool, so no
/// thread switch), and that thread then runs the jobs that queued meanwhile, audio first, until
/// none is left. A job that finds the engine busy is queued for the thread running it. (A
/// dedicated thread cost every request two thread switches: 2,860 → 2,030 acknowledgements/s in
/// the bench's 8-client burst.) Jobs must not be enqueued from a thread that holds a lock the
/// engine may take (a C library's callback): the engine's stream consumers run on Swift's pool.
///
/// One executor serves every engine of a process (``shared``): the daemon has one engine; tests
/// and fuzz targets that make many share it (they are serial with one another, as the jobs of
/// one actor are).
public final class EngineExecutor: SerialExecutor, @unchecked Sendable {
    /// Jobs of this priority or above take the audio lane.
    public static let audioLanePriority = TaskPriority.userInitiated

    /// The process's engine executor.
    public static let shared = EngineExecutor()

    // `@unchecked Sendable`: the queues, `running` and `counts` are only touched under `lock`.
    private let lock = NSLock()
    private var audio = ExecutorJobQueue()
    private var other = ExecutorJobQueue()
    /// Whether a thread is running the engine's jobs (then a new job queues for it).
    private var running = false
    /// The thread running the engine's jobs while `running`.
    private var runner: pthread_t?
    /// Whether the job running now is in the audio lane (its thread then leads no commit).
    private var runningAudio = false
    /// Work the running thread does once it has released the engine (``runAfterRelease(_:otherwise:)``),
    /// each with what to do instead if another job comes first.
    private var afterRelease: [AfterRelease] = []
    /// Work for after the release, with what to do instead if another job comes first.
    private typealias AfterRelease = (body: @Sendable () -> Void, otherwise: @Sendable () -> Void)
    private var counts: (audio: Int, other: Int) = (0, 0)

    public init() {}

    /// Jobs waiting in each lane now.
    public var jobsQueued: (audio: Int, other: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (audio.count, other.count)
    }

    /// Whether an audio-lane job is waiting for the one running: a long notification job (the
    /// commit drain) checks it between its steps and lets the audio job run first.
    public var audioJobWaiting: Bool {
        lock.lock()
        defer { lock.unlock() }
        return audio.count > 0
    }

    /// Jobs run so far in each lane.
    public var jobsRun: (audio: Int, other: Int) {
        lock.lock()
        defer { lock.unlock() }
        return counts
    }

    /// Runs the job now if the engine is free (and then the jobs that queue meanwhile), else
    /// queues it in its lane for the thread running the engine.
    public func enqueue(_ job: consuming ExecutorJob) {
        let isAudio = job.priority.rawValue >= Self.audioLanePriority.rawValue
        let unowned = UnownedJob(job)
        lock.lock()
        if running {
            if isAudio { audio.push(unowned) } else { other.push(unowned) }
            lock.unlock()
            return
        }
        running = true
        runner = pthread_self()
        runningAudio = isAudio
        if isAudio { counts.audio += 1 } else { counts.other += 1 }
        lock.unlock()
        let executor = asUnownedSerialExecutor()
        // The runtime holds the executor unowned: the job may release the last reference to its
        // actor (and so to this executor) while the loop still needs it.
        withExtendedLifetime(self) {
            unowned.runSynchronously(on: executor)
            while true {
                let (next, handOff, after) = nextOrStop()
                for work in handOff { work.otherwise() }
                guard let next else {
                    for work in after { work.body() }
                    break
                }
                next.runSynchronously(on: executor)
            }
        }
    }

    /// Asks the calling thread, which runs the engine's jobs now, to run `body` as soon as it has
    /// released the engine, if no other job comes before: the leader of a group commit (issue 9).
    /// The store's commit then runs on the thread that decided it, off the engine (audio is not
    /// held), without waking a thread of its own: for one app waiting for each reply, one context
    /// switch fewer per `notification.add` (6.5 → 5.5; README "What the numbers say").
    ///
    /// If a job is queued before the engine is free (a burst: the thread would not be free soon),
    /// `otherwise` runs instead, on the engine's thread before that job, and must only hand the
    /// work to a thread of its own (e.g. `DispatchQueue.async`). Exactly one of the two runs.
    /// Not from an audio-lane job: its thread goes on to answer an audio request (a call's
    /// activation that changed the notification state), which must not wait for the disk; its
    /// commit goes to the store's own thread, as before (issue 9 item 2).
    /// - Returns: false (neither is kept) when the calling thread is not running the engine's jobs,
    ///   or runs an audio-lane job.
    public func runAfterRelease(_ body: @escaping @Sendable () -> Void, otherwise: @escaping @Sendable () -> Void) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard running, !runningAudio, let runner, pthread_equal(runner, pthread_self()) != 0 else { return false }
        afterRelease.append((body, otherwise))
        return true
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    /// The next job, audio lane first; nil (and the engine free) when both lanes are empty. With
    /// it, the work kept for after the release: to hand off (a job came first) or to run now (the
    /// engine is free).
    private func nextOrStop() -> (UnownedJob?, handOff: [AfterRelease], run: [AfterRelease]) {
        lock.lock()
        defer { lock.unlock() }
        let kept = afterRelease
        if !kept.isEmpty { afterRelease.removeAll() }
        if let job = audio.pop() {
            counts.audio += 1
            runningAudio = true
            return (job, kept, [])
        }
        if let job = other.pop() {
            counts.other += 1
            runningAudio = false
            return (job, kept, [])
        }
        running = false
        runner = nil
        return (nil, [], kept)
    }
}

/// A first-in, first-out queue of executor jobs (a ring that grows; no allocation per job once
/// grown), for a custom executor's own locking: not thread-safe itself.
public struct ExecutorJobQueue {
    /// An empty queue.
    public init() {}

    private var items: [UnownedJob?] = []
    private var head = 0
    /// Jobs in the queue.
    public private(set) var count = 0

    /// Adds a job at the end.
    public mutating func push(_ job: UnownedJob) {
        if count == items.count {
            // Grow: unroll the ring into a buffer twice as large.
            var grown = [UnownedJob?](repeating: nil, count: max(16, items.count * 2))
            for i in 0..<count { grown[i] = items[(head + i) % items.count] }
            items = grown
            head = 0
        }
        items[(head + count) % items.count] = job
        count += 1
    }

    /// Takes the first job; nil when empty.
    public mutating func pop() -> UnownedJob? {
        guard count > 0 else { return nil }
        let job = items[head]
        items[head] = nil
        head = (head + 1) % items.count
        count -= 1
        return job
    }
}
