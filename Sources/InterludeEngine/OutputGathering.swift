import Foundation

/// A peer's output that can hold what is written to it on this thread until the end of an
/// ``OutputGathering/gather(_:)`` scope, then write it in one go.
public protocol GatheredOutput: AnyObject, Sendable {
    /// Writes what was held for the scope (called once per scope, on the scope's thread).
    func flushGathered()
}

/// Lines to peers gathered on one thread and written together when the scope ends.
///
/// The engine settles a commit's requests inside ``gather(_:)``: their events, then their
/// replies. A connection that would write a line at once on this thread appends it and writes
/// when the scope ends: one `send` per peer per settle instead of one per line (an app's
/// `notification.add` has up to three events before its reply: four sends, four wake-ups of a
/// client that reads each, became one; issue 9). Lines keep their order; nothing waits longer
/// than the scope, which does no I/O of its own.
public final class OutputGathering {
    private var outputs: [any GatheredOutput] = []

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The scope running on this thread, if any.
    public static var current: OutputGathering? {
        pthread_getspecific(key).map { Unmanaged<OutputGathering>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Runs `body` with writes to peers on this thread gathered, then writes them (a scope inside
    /// another is part of it).
    public static func gather<R>(_ body: () throws -> R) rethrows -> R {
        if current != nil { return try body() }
        let scope = OutputGathering()
        pthread_setspecific(key, Unmanaged.passUnretained(scope).toOpaque())
        defer {
            pthread_setspecific(key, nil)
            withExtendedLifetime(scope) { for output in scope.outputs { output.flushGathered() } }
        }
        return try body()
    }

    /// Notes that `output` holds lines for this scope (once per output).
    public func hold(_ output: any GatheredOutput) {
        if !outputs.contains(where: { $0 === output }) { outputs.append(output) }
    }
}
