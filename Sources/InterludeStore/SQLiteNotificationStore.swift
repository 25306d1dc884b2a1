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
/// requests holds a few values each, not a copy of the center each. One committer (a serial
/// dispatch queue) encodes and writes everything queued in one transaction: what arrived while the
/// previous commit was in flight goes into the next one together, in order. Each submit's `NotificationCommit` reports durable only
/// once its transaction's `COMMIT` returned (WAL, `synchronous=FULL`: the commit is on disk). So a
/// SIGKILL loses nothing acknowledged, and n requests arriving together cost one fsync, not n.
///
/// If a commit fails, it and every change queued after it fail (they were diffed against it);
/// later submits fail at once until the engine takes the durable state back
/// (`recoverAfterFailedCommit`, which reads it from the file), from which it carries on.
public final class SQLiteNotificationStore: NotificationStoring, Sendable {
    /// The store's connection: used by the committer queue only (and by `load`/`save`, which the
    /// daemon calls before the first submit, and which wait for the committer).
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
        /// Whether the committer is running.
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
    private let shared = Locked()
    private let committer = DispatchQueue(label: "interlude.store.commit", qos: .userInitiated)
    /// Set on `committer`: tells a call that arrives on it (an engine job the commit's callback
    /// ran there) that it already has the connection to itself.
    private static let onCommitter = DispatchSpecificKey<Bool>()

    /// Opens (or creates) `DIR/interlude.sqlite3`.
    /// - Throws: `StoreError` (`storeCorrupt`, `storeSchemaTooNew`, `storeOpenFailed`, …).
    public init(directory: String) throws {
        confined = Confined(try NotificationStore(directory: directory))
        committer.setSpecific(key: Self.onCommitter, value: true)
    }

    /// Reads the saved state (waiting for commits in flight) and starts diffing from it.
    public func load() throws -> NotificationState {
        try committer.sync {
            let (state, layout) = try confined.store.loadWithSeqs()
            shared.withLock {
                $0.differ = NotificationRowDiffer(state: state, seqs: layout)
                $0.broken = nil
            }
            return state
        }
    }

    /// Saves `state` now, after the commits in flight (as `submit`, then waiting for the committer).
    public func save(_ state: NotificationState) throws {
        guard let ticket = try enqueue(state).get() else { return }
        committer.sync {}  // the committer runs until its queue is empty: the ticket is decided
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
    private func enqueue(_ state: NotificationState) -> Result<UInt64?, StoreError> {
        var startCommitter = false
        defer {
            // Woken after the lock is released: a committer woken under it would wait for it at once
            // (two more thread switches per request for one waiting client; issue 9).
            if startCommitter { committer.async { self.commitQueued() } }
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
        // The failed commit's callback runs on `committer`, and the engine's job with it (the
        // engine runs a job on the thread that brings it): there `committer.sync` would wait for
        // itself (libdispatch traps it). Between two of its commits the connection is free there.
        let recover = { () -> NotificationState? in
            guard self.shared.withLock({ $0.broken != nil }), let (state, layout) = try? self.confined.store.loadWithSeqs() else { return nil }
            self.shared.withLock {
                $0.differ = NotificationRowDiffer(state: state, seqs: layout)
                $0.broken = nil
            }
            return state
        }
        return DispatchQueue.getSpecific(key: Self.onCommitter) == true ? recover() : committer.sync(execute: recover)
    }

    /// Commits so far and the changes they held (a commit holds one or more changes).
    public var commitCounts: (commits: Int, changes: Int) { shared.withLock { ($0.commits, $0.changesWritten) } }

    // MARK: The committer

    /// Runs on `committer`: writes everything queued, one transaction per round, until the queue is empty.
    private func commitQueued() {
        while true {
            let batch: [(ticket: UInt64, changes: NotificationRowChanges)]? = shared.withLock { s in
                if s.queue.isEmpty {
                    s.committing = false
                    return nil
                }
                defer { s.queue.removeAll(keepingCapacity: true) }
                return s.queue
            }
            guard let batch, let first = batch.first, let last = batch.last else { return }
            var error: StoreError?
            do {
                try confined.store.write(batch.map(\.changes))
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
