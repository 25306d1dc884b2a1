import Dispatch
import Foundation
import InterludeEngine
import InterludePolicy
import Synchronization

/// The engine's store port (`NotificationStoring`) on SQLite, with a group commit (N15, issue 9).
///
/// `submit` compares the engine's new state with the one it was handed before
/// (`NotificationRowDiffer`: the rows that changed, as typed values; no encoding, no I/O), queues
/// those rows and returns at once. Only the rows are queued, never the state: a queue of many
/// requests holds a few values each, not a copy of the center each. One committer at a time
/// encodes and writes everything queued in one transaction: what arrived while the previous commit
/// was in flight goes into the next one together, in order. The committer is the thread that
/// submitted, once it has left the engine, when nothing else waits for the engine (the leader,
/// ``EngineExecutor/runAfterRelease(_:otherwise:)``: no thread woken for one app waiting for each
/// reply), else a serial dispatch queue of the store's own (a burst: the deciding threads go on
/// deciding); a leader commits one round and leaves what queued meanwhile to that queue. Each submit's `NotificationCommit` reports durable only
/// once its transaction's `COMMIT` returned (WAL, `synchronous=FULL`: the commit is on disk). So a
/// SIGKILL loses nothing acknowledged, and n requests arriving together cost one fsync, not n.
///
/// If a commit fails, it and every change queued after it fail (they were diffed against it);
/// later submits fail at once until the engine takes the durable state back
/// (`recoverAfterFailedCommit`, which reads it from the file), from which it carries on.
public final class SQLiteNotificationStore: NotificationStoring, Sendable {
    /// The store's connection: used under `connection` only (one commit round at a time, `load`,
    /// and the recovery after a failed commit).
    private final class Confined: @unchecked Sendable {
        let store: NotificationStore
        init(_ store: NotificationStore) { self.store = store }
    }

    private struct Shared: ~Copyable {
        /// What the next submit is diffed against: the state submitted before (nil until `load`,
        /// and after a failed commit).
        var differ: NotificationRowDiffer?
        /// Rows waiting for the next commit, with their tickets.
        var queue: [(ticket: UInt64, changes: NotificationRowChanges)] = []
        var nextTicket: UInt64 = 1
        /// Every ticket up to this one is durable, unless it is in `failed`.
        var durableThrough: UInt64 = 0
        /// Tickets whose commit failed, with the error.
        var failed: [(tickets: ClosedRange<UInt64>, error: StoreError)] = []
        /// Called with their ticket's outcome once it is known (on the committer's thread).
        var waiters: [(ticket: UInt64, body: @Sendable ((any Error)?) -> Void)] = []
        /// Whether a committer runs or is on its way (a leader, or the queue): then a submit only queues.
        var committing = false
        /// After a failed commit, until the engine takes `durable`: submits fail at once.
        var broken: StoreError?
        /// Commits and changes written, for the bench and tests.
        var commits = 0
        var changesWritten = 0
    }

    /// `Shared` under a pthread mutex (NSLock). Not `Synchronization.Mutex`: on Linux it locks with
    /// raw futex calls that ThreadSanitizer cannot see, so the TSan pass of Scripts/test reported
    /// every hand-over between the engine's submit and the committer as a race.
    private final class Locked: @unchecked Sendable {
        private let lock = NSLock()
        private var value = Shared()
        func withLock<R>(_ body: (inout Shared) -> R) -> R {
            lock.lock()
            defer { lock.unlock() }
            return body(&value)
        }
    }

    private let confined: Confined
    /// Held while `confined`'s connection is in use (a commit round, `load`, the recovery).
    private let connection = NSLock()
    private let shared = Locked()
    /// Commits when no leader does (see the type's documentation).
    private let committer = DispatchQueue(label: "interlude.store.commit", qos: .userInitiated)
    /// The engine's executor, whose threads lead commits (nil: always `committer`).
    private let leaders: EngineExecutor?

    /// Opens (or creates) `DIR/interlude.sqlite3`.
    /// - Parameter leaders: the executor of the engine that submits, whose thread commits what it
    ///   submitted once it leaves the engine when nothing else waits (nil: the store's own queue
    ///   commits everything).
    /// - Throws: `StoreError` (`storeCorrupt`, `storeSchemaTooNew`, `storeOpenFailed`, …).
    public init(directory: String, leaders: EngineExecutor? = nil) throws {
        confined = Confined(try NotificationStore(directory: directory))
        self.leaders = leaders
    }

    /// Reads the saved state (after the commit round running) and starts diffing from it.
    public func load() throws -> NotificationState {
        try connection.withLock {
            let (state, layout) = try confined.store.loadWithSeqs()
            shared.withLock {
                $0.differ = NotificationRowDiffer(state: state, seqs: layout)
                $0.broken = nil
            }
            return state
        }
    }

    /// Saves `state` now, after the commits in flight (as `submit`, then waiting for its commit).
    /// Not from a thread running the engine's jobs (a commit it leads would wait for it).
    public func save(_ state: NotificationState) throws {
        guard let ticket = try enqueue(state, offerLeader: false).get() else { return }
        let settled = DispatchSemaphore(value: 0)
        Ticket(store: self, number: ticket).whenSettled { _ in settled.signal() }
        settled.wait()
        if let error = shared.withLock({ Self.failure(of: ticket, in: $0.failed) }) { throw error }
    }

    /// Queues `state` for the next commit (see the type's documentation); returns at once.
    public func submit(_ state: NotificationState) -> NotificationCommit {
        switch enqueue(state) {
        case let .failure(error): return .failed(error)
        case .success(nil): return .durable
        case let .success(ticket?): return NotificationCommit(tracker: Ticket(store: self, number: ticket))
        }
    }

    /// Diffs and queues; the ticket to wait for, nil if durable already.
    private func enqueue(_ state: NotificationState, offerLeader: Bool = true) -> Result<UInt64?, StoreError> {
        var startCommitter = false
        defer {
            // Started after the lock is released: a committer woken under it would wait for it at
            // once (two more thread switches per request for one waiting client; issue 9).
            if startCommitter {
                if !offerLeader || leaders?.runAfterRelease({ self.commitQueued(rounds: 1) }, otherwise: commitOnQueue) != true {
                    commitOnQueue()
                }
            }
        }
        return shared.withLock { s in
            if let broken = s.broken { return .failure(broken) }
            guard s.differ != nil else {
                return .failure(StoreError(.storeFailed, "the notification store was not loaded before the first save"))
            }
            let changes = s.differ!.changes(to: state)
            if changes.isEmpty {
                // Nothing to write: durable when what was queued before is.
                let last = s.nextTicket - 1
                return .success(last > s.durableThrough ? last : nil)
            }
            let ticket = s.nextTicket
            s.nextTicket += 1
            s.queue.append((ticket, changes))
            if !s.committing {
                s.committing = true
                startCommitter = true
            }
            return .success(ticket)
        }
    }

    /// Takes the durable state back after a failed commit (once per failure): reads it from the
    /// file, after the commits in flight. Nil if it was taken already, or cannot be read (then
    /// submits keep failing, and the next call tries again).
    public func recoverAfterFailedCommit() -> NotificationState? {
        guard shared.withLock({ $0.broken != nil }) else { return nil }
        // A commit round's callbacks (and the engine's job they run) are called after it released
        // the connection: taking it here does not wait for itself.
        return connection.withLock { () -> NotificationState? in
            guard self.shared.withLock({ $0.broken != nil }), let (state, layout) = try? self.confined.store.loadWithSeqs() else { return nil }
            self.shared.withLock {
                $0.differ = NotificationRowDiffer(state: state, seqs: layout)
                $0.broken = nil
            }
            return state
        }
    }

    /// Commits so far and the changes they held (a commit holds one or more changes).
    public var commitCounts: (commits: Int, changes: Int) { shared.withLock { ($0.commits, $0.changesWritten) } }

    // MARK: The committer

    /// Hands the committing to the store's own queue (no leader, a leader handing off, or a
    /// leader's one round done with more queued).
    @Sendable private func commitOnQueue() { committer.async { self.commitQueued() } }

    /// The committer (on `committer`, or a leader's thread; one at a time, `committing`): writes
    /// everything queued, one transaction per round, until the queue is empty or `rounds` are
    /// done; then what is queued is left to `committer`.
    private func commitQueued(rounds: Int = .max) {
        var roundsLeft = rounds
        while true {
            let batch: [(ticket: UInt64, changes: NotificationRowChanges)]? = shared.withLock { s in
                if s.queue.isEmpty {
                    s.committing = false
                    return nil
                }
                if roundsLeft == 0 { return [] }  // still `committing`: the queue takes over
                defer { s.queue.removeAll(keepingCapacity: true) }
                return s.queue
            }
            guard let batch else { return }
            guard let first = batch.first, let last = batch.last else {
                commitOnQueue()
                return
            }
            roundsLeft -= 1
            var error: StoreError?
            do {
                try connection.withLock { try confined.store.write(batch.map(\.changes)) }
            } catch let e as StoreError {
                error = e
            } catch let other {
                error = StoreError(.storeFailed, "\(other)")
            }
            let ready: [@Sendable ((any Error)?) -> Void] = shared.withLock { s in
                if let error {
                    // This batch and everything queued after it were diffed against it: all fail.
                    let through = s.nextTicket - 1
                    s.failed.append((first.ticket...through, error))
                    s.queue.removeAll()
                    s.broken = error
                    s.differ = nil
                    s.durableThrough = through
                } else {
                    s.durableThrough = last.ticket
                    s.commits += 1
                    s.changesWritten += batch.count
                }
                var done: [@Sendable ((any Error)?) -> Void] = []
                var i = 0
                while i < s.waiters.count, s.waiters[i].ticket <= s.durableThrough {
                    done.append(s.waiters[i].body)
                    i += 1
                }
                s.waiters.removeFirst(i)
                return done
            }
            let outcome: (any Error)? = error
            for body in ready { body(outcome) }
        }
    }

    /// One submit's commit, as `NotificationCommit` asks about it.
    private struct Ticket: NotificationCommitTracking {
        let store: SQLiteNotificationStore
        let number: UInt64

        func settledNow() -> (any Error)?? { store.shared.withLock { outcome(in: $0) } }

        func whenSettled(_ body: @escaping @Sendable ((any Error)?) -> Void) {
            let now: (any Error)?? = store.shared.withLock { s in
                if let known = outcome(in: s) { return known }
                // Tickets are waited for in about the order they were given: keep the list sorted.
                var i = s.waiters.count
                while i > 0, s.waiters[i - 1].ticket > number { i -= 1 }
                s.waiters.insert((number, body), at: i)
                return nil
            }
            if let now { body(now) }
        }

        /// Nil while in flight; `.some(nil)` durable, `.some(error)` failed.
        private func outcome(in s: borrowing Shared) -> (any Error)?? {
            number <= s.durableThrough ? .some(SQLiteNotificationStore.failure(of: number, in: s.failed)) : nil
        }
    }

    private static func failure(of ticket: UInt64, in failed: [(tickets: ClosedRange<UInt64>, error: StoreError)]) -> (any Error)? {
        failed.last { $0.tickets.contains(ticket) }?.error
    }
}
