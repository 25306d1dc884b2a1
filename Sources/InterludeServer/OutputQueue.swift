import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The lines a connection has yet to write, kept as the buffers they were encoded in, each
/// followed by a newline when written.
///
/// An engine event's line (``EngineEvent/line``) is encoded once for every connection that
/// writes it: kept by reference here, the connections that have not written it yet hold one copy
/// between them, not one each. Clients that subscribe and do not read used to hold their own
/// copy of up to `server.maxOutputBytes` each (a contiguous byte buffer per connection; SECURITY.md
/// "Slow readers"). Written with `sendmsg` over up to ``linesPerWrite`` lines at a time.
struct OutputQueue {
    private var lines: [Data] = []
    /// The first line not wholly written.
    private var head = 0
    /// Bytes of `lines[head]` already written, its newline counted as its last byte.
    private var offset = 0
    /// Bytes (newlines included) not yet written.
    private(set) var pendingBytes = 0

    /// Lines gathered into one `sendmsg` (two buffers each: the line and its newline).
    static let linesPerWrite = 64

    /// Whether every line has been written.
    var isEmpty: Bool { pendingBytes == 0 }

    /// The lines not yet wholly written, first to last (tests: which buffers are held).
    var waiting: ArraySlice<Data> { lines[head...] }

    /// Queues `line` (without its newline) after the others.
    mutating func append(_ line: Data) {
        if head >= 64, head * 2 >= lines.count {
            lines.removeFirst(head)
            head = 0
        }
        lines.append(line)
        pendingBytes += line.count + 1
    }

    /// Forgets every line; a large array is freed rather than kept for the connection's life.
    mutating func removeAll() {
        lines.removeAll(keepingCapacity: lines.capacity <= 256)
        head = 0
        offset = 0
        pendingBytes = 0
    }

    /// What one ``write(to:)`` came to.
    enum WriteOutcome: Equatable {
        /// Everything queued is written.
        case allWritten
        /// The socket takes no more now (EAGAIN): the rest waits for room.
        case full
        /// The peer is gone or the socket failed (the errno).
        case failed(Int32)
    }

    /// Writes what the socket takes without blocking (`sendmsg` with `MSG_NOSIGNAL | MSG_DONTWAIT`:
    /// a peer that went away must not raise SIGPIPE in the daemon), and forgets what was written.
    mutating func write(to fd: Int32) -> WriteOutcome {
        while !isEmpty {
            let end = min(lines.count, head + Self.linesPerWrite)
            let n = Self.send(fd, lines[head..<end], skipping: offset)
            if n > 0 { advance(by: n); continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .full }
            return .failed(n < 0 ? errno : EPIPE)
        }
        removeAll()
        return .allWritten
    }

    /// Moves past `n` written bytes.
    private mutating func advance(by n: Int) {
        var left = n
        pendingBytes -= n
        while left > 0 {
            let rest = lines[head].count + 1 - offset
            if left < rest { offset += left; return }
            left -= rest
            lines[head] = Data()  // written: its buffer is released now
            head += 1
            offset = 0
        }
    }

    /// One newline byte that every write points at.
    private nonisolated(unsafe) static let newline: UnsafeMutableRawPointer = {
        let p = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
        p.storeBytes(of: 0x0a, as: UInt8.self)
        return p
    }()

    /// `sendmsg` of `lines` (each with its newline), the first `skip` bytes of the first one
    /// already written. The buffers' addresses are taken inside nested `withUnsafeBytes`, so each
    /// stays valid for the call.
    private static func send(_ fd: Int32, _ lines: ArraySlice<Data>, skipping skip: Int) -> Int {
        var iov: [iovec] = []
        iov.reserveCapacity(2 * lines.count)
        func gather(_ rest: ArraySlice<Data>, _ skip: Int) -> Int {
            guard let line = rest.first else {
                return iov.withUnsafeMutableBufferPointer { buffers -> Int in
                    var message = msghdr()
                    message.msg_iov = buffers.baseAddress
                    message.msg_iovlen = buffers.count
                    return sendmsg(fd, &message, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
            }
            return line.withUnsafeBytes { bytes -> Int in
                if skip < bytes.count, let base = bytes.baseAddress {
                    iov.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: base + skip), iov_len: bytes.count - skip))
                }
                iov.append(iovec(iov_base: newline, iov_len: 1))
                return gather(rest.dropFirst(), 0)
            }
        }
        return gather(lines, skip)
    }
}
