import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a thread that serves others does while it blocks: a connection loop's thread (the
/// server's `ConnectionLoop`) hands its sockets and jobs to another thread before it waits for the
/// disk, so that the other connections of its loop (a `session.activate` among them) are not held
/// by a notification's commit (issue 9 item 2: "a call must never wait behind a disk write").
public protocol BlockingHandOff: AnyObject, Sendable {
    /// The calling thread is about to block: its duties go to another thread. Until its current
    /// job returns, the calling thread is theirs no more.
    func willBlock()
}

/// Work that blocks the calling thread (the store's commit: `fdatasync`, from a fraction of a
/// millisecond on an SSD to tens of milliseconds on a disk), run so that the thread's owner can
/// hand its duties over first (``BlockingHandOff``).
public enum BlockingWork {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    /// Sets what the calling thread does before it blocks (nil: nothing). The thread's owner sets
    /// it once, when the thread starts, and keeps `handOff` alive as long as the thread lives.
    public static func setHandOffForThisThread(_ handOff: (any BlockingHandOff)?) {
        if let old = pthread_getspecific(key) { Unmanaged<HandOffBox>.fromOpaque(old).release() }
        pthread_setspecific(key, handOff.map { Unmanaged.passRetained(HandOffBox($0)).toOpaque() })
    }

    /// Runs `body`, which blocks, after the calling thread's owner has handed its duties over.
    public static func run<T>(_ body: () throws -> T) rethrows -> T {
        if let raw = pthread_getspecific(key) {
            Unmanaged<HandOffBox>.fromOpaque(raw).takeUnretainedValue().handOff.willBlock()
        }
        return try body()
    }

    private final class HandOffBox {
        let handOff: any BlockingHandOff
        init(_ handOff: any BlockingHandOff) { self.handOff = handOff }
    }
}
