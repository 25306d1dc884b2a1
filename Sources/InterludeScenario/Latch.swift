import Foundation

/// A one-way gate tasks can wait on: closed until `open()`, then open for ever. A waiting task
/// that is cancelled stops waiting (so a race of waits in a task group can end).
public final class Latch: @unchecked Sendable {
    private let lock = NSLock()
    private var isOpen = false
    private var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]

    public init() {}

    /// Whether `open()` was called.
    public var opened: Bool { lock.withLock { isOpen } }

    /// Opens the latch: every waiter and every later `wait()` returns.
    public func open() {
        let all = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            isOpen = true
            defer { waiters = [:] }
            return Array(waiters.values)
        }
        all.forEach { $0.resume() }
    }

    /// Returns when the latch is open, or when the calling task is cancelled.
    public func wait() async {
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
                let now = lock.withLock { () -> Bool in
                    if isOpen || Task.isCancelled { return true }
                    waiters[id] = k
                    return false
                }
                if now { k.resume() }
            }
        } onCancel: {
            let k = lock.withLock { waiters.removeValue(forKey: id) }
            k?.resume()
        }
    }

    /// Waits for the first of several latches and returns its index.
    public static func first(_ latches: [Latch]) async -> Int {
        await withTaskGroup(of: Int.self) { g in
            for (i, l) in latches.enumerated() { g.addTask { await l.wait(); return i } }
            let winner = await g.next() ?? 0
            g.cancelAll()
            return winner
        }
    }
}
