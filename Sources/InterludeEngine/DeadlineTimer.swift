/// The engine's one pending wake-up for a policy's next deadline. Both policies report their next
/// deadline after every event (`AudioPolicy.nextDeadline`, `NotificationPolicy.nextDeadline`);
/// the timer is re-armed only when that deadline changes, and a newer one cancels the older sleep.
struct DeadlineTimer {
    /// The deadline armed, in the policy's own time (monotonic seconds for the audio policy, wall
    /// time for the notification policy); nil when none.
    private(set) var deadline: Double?
    private var task: Task<Void, Never>?

    /// Arms the timer for `deadline` (nil disarms it). The sleep is until `sleepUntil(deadline)` on
    /// `clock` (monotonic seconds); `fire` runs then unless the timer was re-armed since.
    /// `priority` is the wake-up's: the audio policy's takes the engine's audio lane (``EngineExecutor``).
    mutating func arm(_ deadline: Double?, clock: EngineClock, sleepUntil: (Double) -> Double = { $0 },
                      priority: TaskPriority? = nil, fire: @escaping @Sendable () async -> Void) {
        guard deadline != self.deadline else { return }
        task?.cancel()
        self.deadline = deadline
        guard let deadline else { task = nil; return }
        let due = sleepUntil(deadline)
        task = Task(priority: priority) {
            do { try await clock.sleep(until: due) } catch { return }
            await fire()
        }
    }

    /// Forgets the deadline: it fired, and the next event arms the timer again.
    mutating func fired() { deadline = nil }
}
