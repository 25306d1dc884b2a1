import Dispatch
import Foundation
import InterludeEngine
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// One client connection: reads lines (64 KiB cap), hands requests to the engine one at a time in
/// order, writes replies and events without blocking, and drops a reader that lets more than
/// `maxOutputBytes` pile up.
final class Connection: @unchecked Sendable {
    let fd: Int32
    let pid: Int32
    let queue: DispatchQueue
    let maxOutputBytes: Int
    let log: @Sendable (String) -> Void
    private var framer = LineFramer()
    private var output: [UInt8] = []
    private var readSource: DispatchSourceRead?
    private var writeSource: DispatchSourceWrite?
    private var writeSuspended = true
    private var closed = false
    private var closeAfterFlush = false
    private let requests: AsyncStream<[UInt8]>
    private let requestSink: AsyncStream<[UInt8]>.Continuation
    var onClose: (@Sendable () -> Void)?

    init(fd: Int32, pid: Int32, maxOutputBytes: Int, log: @escaping @Sendable (String) -> Void) {
        self.fd = fd
        self.pid = pid
        self.maxOutputBytes = maxOutputBytes
        self.log = log
        self.queue = DispatchQueue(label: "interlude.connection.\(fd)")
        (requests, requestSink) = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .unbounded)
    }

    /// The request lines, in order, until the peer closes.
    var lines: AsyncStream<[UInt8]> { requests }

    func start() {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        // The fd is closed after both sources are off it (their cancel handlers have run): closed
        // earlier, its number can be reused by a new connection while libdispatch still watches
        // it, and the late unregistration silences the new connection.
        let closer = CloseAfterBoth(fd: fd)
        let rs = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        rs.setEventHandler { [weak self] in self?.readAvailable() }
        rs.setCancelHandler { closer.release() }
        readSource = rs
        let ws = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        ws.setEventHandler { [weak self] in self?.flush() }
        ws.setCancelHandler { closer.release() }
        writeSource = ws
        rs.resume()
    }

    private func readAvailable() {
        var buf = [UInt8](repeating: 0, count: 16384)
        while !closed {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                do {
                    for line in try framer.feed(buf[0..<n]) where !line.isEmpty { requestSink.yield(line) }
                } catch {
                    log("client pid \(pid): message of \(error.bytes)+ bytes over the 64 KiB cap; closing")
                    sendLocked(ServerMessage.reply(WireReply(id: nil, error: WireError(.tooLarge,
                        "a message may be at most \(LineFramer.defaultMaxLineBytes) bytes; closing the connection"))))
                    closeAfterFlush = true
                    readSource?.cancel()  // kept: closeLocked sees it was cancelled already
                    requestSink.finish()
                    flush()
                    return
                }
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
            // EOF or error: the peer is gone (a partial message is dropped).
            closeLocked()
            return
        }
    }

    /// Queues a message for the peer. Safe from any thread.
    func send(_ m: ServerMessage) {
        queue.async { self.sendLocked(m) }
    }

    private func sendLocked(_ m: ServerMessage) {
        guard !closed, let data = try? m.encoded() else { return }
        output.append(contentsOf: data)
        output.append(0x0a)
        if output.count > maxOutputBytes {
            log("client pid \(pid) does not read (\(output.count) bytes pending); disconnecting")
            closeLocked()
            return
        }
        flush()
    }

    private func flush() {
        while !output.isEmpty && !closed {
            // send(MSG_NOSIGNAL): a peer that went away must not raise SIGPIPE in the daemon.
            let n = output.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { output.removeFirst(n); continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EAGAIN {
                if writeSuspended { writeSuspended = false; writeSource?.resume() }
                return
            }
            closeLocked()
            return
        }
        if !writeSuspended { writeSuspended = true; writeSource?.suspend() }
        if closeAfterFlush { closeLocked() }
    }

    /// Closes once what is queued has been written.
    func closeWhenFlushed() { queue.async { self.closeAfterFlush = true; self.flush() } }

    func close() { queue.async { self.closeLocked() } }

    private func closeLocked() {
        guard !closed else { return }
        closed = true
        if let rs = readSource, !rs.isCancelled { rs.cancel() }
        if writeSuspended { writeSource?.resume() }
        writeSource?.cancel()
        requestSink.finish()
        onClose?()
    }
}

/// Closes a file descriptor when the last of its two dispatch sources has been cancelled.
private final class CloseAfterBoth: @unchecked Sendable {
    private let fd: Int32
    private let lock = NSLock()
    private var left = 2
    init(fd: Int32) { self.fd = fd }
    func release() {
        let last = lock.withLock { left -= 1; return left == 0 }
        if last { _ = Glibc.close(fd) }
    }
}
