import Foundation

/// Runs `body` for at most `seconds` (wall time) and says whether it finished; a body still
/// running then is left to finish on its own. For the daemon's stop, which waits a bounded time
/// for the requests in flight (SocketServer.shutDown, NotificationsBus.shutDown).
public func finishes(within seconds: Double, _ body: @escaping @Sendable () async -> Void) async -> Bool {
    let first = FirstOutcome()
    return await withCheckedContinuation { (k: CheckedContinuation<Bool, Never>) in
        first.set(k)
        Task { await body(); first.resume(true) }
        Task { try? await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9)); first.resume(false) }
    }
}

/// A continuation resumed by the first of several racers.
private final class FirstOutcome: @unchecked Sendable {
    // NSLock: ThreadSanitizer cannot see Mutex on Linux.
    private let lock = NSLock()
    private var k: CheckedContinuation<Bool, Never>?
    func set(_ k: CheckedContinuation<Bool, Never>) { lock.withLock { self.k = k } }
    func resume(_ value: Bool) {
        let k: CheckedContinuation<Bool, Never>? = lock.withLock {
            defer { self.k = nil }
            return self.k
        }
        k?.resume(returning: value)
    }
}
