import Foundation
import InterludeWire

/// One connection's pipelined `notification.add` replies, written in request order by whoever
/// settles them (issue 9).
///
/// The handler reserves a place for each add it hands to the engine (``reserve()``); the engine
/// settles each once its state is durable, on its own thread (the store's, right after the
/// commit), or at once when it refuses it. A reply settled out of order (a refusal behind a
/// commit in flight) waits for the ones before it; each settled reply that is next in line is
/// written then and there, on the settling thread, so a one-by-one client's acknowledgement does
/// not wait for the handler's task to be woken. The handler waits (``drained()``) before any
/// request that is not an add, so every reply keeps the request order.
///
/// `@unchecked Sendable`: all state is under `lock` (NSLock: ThreadSanitizer cannot see Mutex on Linux).
final class ReplySequencer: @unchecked Sendable {
    private let connection: Connection
    private let lock = NSLock()
    /// The number the next reserved reply gets.
    private var nextReserved = 0
    /// The number of the next reply to write.
    private var nextWritten = 0
    /// Settled replies waiting for one before them, by number.
    private var settled: [Int: (id: JSONValue, result: Result<Data, WireError>)] = [:]
    /// Serializes writing: replies leave in number order even when two threads settle at once.
    private var writing = false
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []

    init(connection: Connection) { self.connection = connection }

    /// Replies reserved and not yet written.
    var outstanding: Int { lock.withLock { nextReserved - nextWritten } }

    /// A place in line for the next reply.
    func reserve() -> Int {
        lock.withLock {
            defer { nextReserved += 1 }
            return nextReserved
        }
    }

    /// Settles reply `number` (to the request `id`): writes it now if it is next in line, with
    /// those after it that are settled already; else keeps it until its turn.
    func settle(_ number: Int, id: JSONValue, _ result: Result<Data, WireError>) {
        var write: [(id: JSONValue, result: Result<Data, WireError>)] = []
        var waiters: [CheckedContinuation<Void, Never>] = []
        lock.lock()
        settled[number] = (id, result)
        if writing {
            // The thread writing takes this one too, in its turn.
            lock.unlock()
            return
        }
        writing = true
        while true {
            while let next = settled.removeValue(forKey: nextWritten) {
                write.append(next)
                nextWritten += 1
            }
            if write.isEmpty {
                writing = false
                if nextWritten == nextReserved { swap(&waiters, &drainWaiters) }
                lock.unlock()
                break
            }
            lock.unlock()
            // Written outside the lock, in order: only this thread writes until `writing` is off.
            for (id, r) in write {
                switch r {
                case let .success(data): connection.reply(id: id, result: data)
                case let .failure(e): connection.reply(.reply(WireReply(id: id, error: e)))
                }
            }
            write.removeAll()
            lock.lock()
        }
        for w in waiters { w.resume() }
    }

    /// Returns once every reserved reply has been written.
    func drained() async {
        await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if nextWritten == nextReserved && !writing { return true }
                drainWaiters.append(k)
                return false
            }
            if now { k.resume() }
        }
    }
}
