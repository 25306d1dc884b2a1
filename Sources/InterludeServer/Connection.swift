import Dispatch
import Foundation
import InterludeEngine
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// What one connection may make the daemon hold (PROTOCOL.md "Limits", issue 7 hole 5).
public struct ConnectionLimits: Sendable, Equatable {
    /// Replies and events waiting to be written, in bytes; over it the connection is closed
    /// (`server.maxOutputBytes`, default 1 MiB). Counted when a reply is produced, before it is
    /// queued for writing, so a peer that does not read cannot make the daemon hold more.
    public var maxOutputBytes: Int
    /// Requests received but not yet handled; at this many the daemon stops reading the socket
    /// until the handler has caught up (backpressure: the peer's writes block).
    public var maxQueuedRequests: Int
    /// Bytes received but not yet handled (whole requests and the partial one); at this many the
    /// daemon stops reading the socket. At most one read (16 KiB) more is held.
    public var maxReadAheadBytes: Int

    /// Lines sent paced (``Connection/send(paced:_:)``: the parts of a removal of many, a
    /// `notification.remove` reply) that wait beyond `maxOutputBytes` for the peer to read what came
    /// before them, with the lines sent after them (kept in order), in bytes: 8 × `maxOutputBytes`,
    /// or the engine's ``Engine/removalAllowance`` (a whole removal at the center's limits) when
    /// larger. Over it the connection is closed as a peer that does not read.
    public var maxPacedBytes: Int { 8 * maxOutputBytes }

    /// The defaults: 1 MiB out, 64 requests or 128 KiB (two lines at the 64 KiB cap) in.
    public init(maxOutputBytes: Int = 1 << 20, maxQueuedRequests: Int = 64,
                maxReadAheadBytes: Int = 2 * LineFramer.defaultMaxLineBytes) {
        self.maxOutputBytes = maxOutputBytes
        self.maxQueuedRequests = maxQueuedRequests
        self.maxReadAheadBytes = maxReadAheadBytes
    }
}

/// A dispatch source's life as one state machine (issue 7 hole 2). libdispatch kills the process
/// (SIGILL) when a source is released while suspended or never activated, when it is resumed more
/// often than suspended, and when it is resumed or suspended in the wrong order around `cancel`.
/// Every `resume`, `suspend` and `cancel` of a connection's sources goes through here, under the
/// connection's lock, so none of those can happen.
struct SourceSwitch {
    enum State { case off, on, cancelled }  // off: not yet activated, or suspended
    private(set) var state: State = .off
    let source: DispatchSourceProtocol
    init(_ source: DispatchSourceProtocol) { self.source = source }

    /// Delivers events (resumes); nothing once cancelled.
    mutating func turnOn() {
        guard state == .off else { return }
        state = .on
        source.resume()
    }

    /// Stops delivering events (suspends); nothing unless on.
    mutating func turnOff() {
        guard state == .on else { return }
        state = .off
        source.suspend()
    }

    /// Cancels for good. A suspended (or never activated) source is resumed after the cancel, so
    /// that its cancel handler runs and it may be released; no event handler runs after this.
    mutating func cancel() {
        switch state {
        case .cancelled: return
        case .on: source.cancel()
        case .off: source.cancel(); source.resume()
        }
        state = .cancelled
    }
}

/// One client connection: reads lines (64 KiB cap), hands requests to the engine one at a time in
/// order, writes replies and events without blocking, and bounds what the peer can make the daemon
/// hold (``ConnectionLimits``): it stops reading while requests are waiting, and drops a reader
/// that lets more than `maxOutputBytes` pile up.
///
/// All state is under `lock`; the dispatch sources' handlers run on `queue`. Messages are written
/// in the order they were sent: a message goes through `queue` unless nothing is queued or
/// waiting to be written before it (then it is written at once, under the lock).
final class Connection: GatheredOutput, @unchecked Sendable {
    let fd: Int32
    let pid: Int32
    let queue: DispatchQueue
    /// Runs the connection's request handler on `queue` (``ConnectionTaskExecutor``).
    let taskExecutor: ConnectionTaskExecutor
    let limits: ConnectionLimits
    /// Paced bytes allowed beyond `limits.maxPacedBytes` when larger (the engine's
    /// ``Engine/removalAllowance``: a whole removal at the center's limits); nil: none.
    let removalAllowance: SharedByteCount?
    let log: @Sendable (String) -> Void
    /// Called once, when the connection has closed (set at init: no window where a close is missed).
    private let onClose: (@Sendable () -> Void)?

    private enum Phase { case open, draining, closed }
    private let lock = NSLock()
    private var phase = Phase.open
    private var framer = LineFramer()
    /// The lines to write, as the buffers they were encoded in (shared with the other
    /// connections that write the same event).
    private var output = OutputQueue()
    /// Lines appended inside an ``OutputGathering`` scope and not yet written: more lines may be
    /// appended at once (they follow them), and the scope's end writes them all.
    private var gathered = false
    /// Bytes of replies encoded and on their way through `queue`, not yet in `output`.
    private var inFlight = 0
    /// Messages (`send`) on their way through `queue`, to be encoded there, not yet in `output`.
    private var sendsQueued = 0
    /// Paced lines waiting for room in `output` (``send(paced:_:)``), with every line sent after
    /// them; `pacedHead` is the first not yet moved.
    private var paced: [Data] = []
    private var pacedHead = 0
    /// Bytes (with newlines) of the paced lines waiting, bounded by `limits.maxPacedBytes`.
    private var pacedBytes = 0
    /// Whether `output` holds lines moved from the paced lane and not yet written: lines sent now
    /// queue behind them in the paced lane (they may pass `maxOutputBytes`, which those lines
    /// were not counted against).
    private var pacedInOutput = false
    private var reader: SourceSwitch?
    private var writer: SourceSwitch?
    /// The request handler waiting for the next line.
    private var waiting: CheckedContinuation<[UInt8]?, Never>?
    /// Whether reading stopped because requests are waiting (not for good).
    private var readPaused = false
    /// Whether reading stopped for good while replies may still be written (``stopReading()``).
    private var readingStopped = false
    /// Whether the peer shut its writing side (`shutdown(SHUT_WR)`) and waits for the replies:
    /// the lines it sent are still handled, then the connection closes once they are written.
    private var peerHalfClosed = false

    init(fd: Int32, pid: Int32, limits: ConnectionLimits, removalAllowance: SharedByteCount? = nil,
         log: @escaping @Sendable (String) -> Void, onClose: (@Sendable () -> Void)? = nil) {
        self.fd = fd
        self.pid = pid
        self.limits = limits
        self.removalAllowance = removalAllowance
        self.log = log
        self.onClose = onClose
        self.queue = DispatchQueue(label: "interlude.connection.\(fd)", target: Connection.ioTarget)
        self.taskExecutor = ConnectionTaskExecutor(queue: queue)
    }

    /// What every connection's queue runs on: the global queue, whose threads are about as many as
    /// the cores. A queue made without a target runs on the overcommitting root queue, which starts
    /// a thread whenever none is idle: 256 busy connections made 260 threads (and a malloc arena per
    /// thread, whose memory stays: issue 7 hole 6).
    static let ioTarget = DispatchQueue.global(qos: .userInitiated)

    deinit {
        // Only reached with live sources if the connection was never closed: cancel them the one
        // safe way (a suspended source released is a crash).
        reader?.cancel()
        writer?.cancel()
    }

    /// Starts reading and writing (once; not after a close).
    func start() {
        guard lock.withLock({ phase == .open && reader == nil }) else { return }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        // The fd is closed after both sources are off it (their cancel handlers have run): closed
        // earlier, its number can be reused by a new connection while libdispatch still watches
        // it, and the late unregistration silences the new connection.
        let closer = CloseAfterBoth(fd: fd)
        let rs = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        rs.setEventHandler { [weak self] in self?.readAvailable() }
        rs.setCancelHandler { closer.release() }
        let ws = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        ws.setEventHandler { [weak self] in self?.writable() }
        ws.setCancelHandler { closer.release() }
        lock.withLock {
            reader = SourceSwitch(rs)
            writer = SourceSwitch(ws)
            reader?.turnOn()
        }
    }

    // MARK: Requests in

    /// The next request line, in order; nil once the connection is closing (peer gone, `tooLarge`,
    /// or closed by the daemon). One caller at a time.
    func nextRequest() async -> [UInt8]? {
        await withCheckedContinuation { (k: CheckedContinuation<[UInt8]?, Never>) in
            var resumeReading = false
            let now: [UInt8]?? = lock.withLock {
                if phase != .open || readingStopped { return .some(nil) }
                if let line = takeLineLocked(&resumeReading) { return .some(line) }
                if peerHalfClosed { return .some(nil) }  // every line it sent has been handed over
                waiting = k
                return .none
            }
            if let now { k.resume(returning: now) }
            if resumeReading { queue.async { [weak self] in self?.readAvailable() } }
        }
    }

    /// The next request line if one has arrived already; nil (at once) if none has, or the
    /// connection is closed. For a pipelining handler (issue 9): it takes what is here, and sends
    /// the replies it holds before it waits.
    func nextRequestIfReady() -> [UInt8]? {
        var resumeReading = false
        let line: [UInt8]? = lock.withLock { phase == .open && !readingStopped ? takeLineLocked(&resumeReading) : nil }
        if resumeReading { queue.async { [weak self] in self?.readAvailable() } }
        return line
    }

    /// Takes the next non-empty line; turns reading back on when below the bounds again.
    private func takeLineLocked(_ resumeReading: inout Bool) -> [UInt8]? {
        var line: [UInt8]?
        while let l = framer.nextLine() {
            if !l.isEmpty { line = l; break }
        }
        if readPaused && !overReadBoundLocked {
            readPaused = false
            reader?.turnOn()
            // Also read at once: a source turned on again need not fire for bytes that were
            // already waiting when it was turned off.
            resumeReading = true
        }
        return line
    }

    private var overReadBoundLocked: Bool {
        framer.completeLines >= limits.maxQueuedRequests || framer.pendingBytes >= limits.maxReadAheadBytes
    }

    private func readAvailable() {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16384) { buf in
            var reads = 0
            while true {
                if reads == 8 {
                    // 128 KiB in one go: let the other connections' work on the shared threads run first.
                    queue.async { [weak self] in self?.readAvailable() }
                    return
                }
                reads += 1
                let go: Bool = lock.withLock {
                    guard phase == .open, reader?.state == .on else { return false }
                    if overReadBoundLocked {
                        // Backpressure (hole 5): the socket's buffer fills and the peer's writes block.
                        readPaused = true
                        reader?.turnOff()
                        return false
                    }
                    return true
                }
                guard go else { return }
                let n = read(fd, buf.baseAddress, buf.count)
                if n > 0 {
                    received(UnsafeBufferPointer(rebasing: buf[0..<n]))
                    continue
                }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
                if n == 0 && !peerHasClosed(fd) {
                    peerEndedWriting()
                    return
                }
                // Closed or an error: the peer is gone (requests not yet handled and a partial one
                // are dropped, its sessions end at once, A9).
                closeNow()
                return
            }
        }
    }

    private func received(_ bytes: UnsafeBufferPointer<UInt8>) {
        var handOff: (CheckedContinuation<[UInt8]?, Never>, [UInt8])?
        var after: [() -> Void] = []
        lock.withLock {
            guard phase == .open, !readingStopped else { return }
            do {
                try framer.append(bytes)
            } catch {
                let size = (error as? LineFramer.Overflow)?.bytes ?? 0
                after.append { [log, pid] in log("client pid \(pid): message of \(size)+ bytes over the 64 KiB cap; closing") }
                tooLargeLocked(&after)
                return
            }
            if let k = waiting {
                var ignored = false
                if let line = takeLineLocked(&ignored) {
                    waiting = nil
                    handOff = (k, line)
                }
            }
        }
        if let (k, line) = handOff { k.resume(returning: line) }
        for a in after { a() }
    }

    /// The peer shut its writing side but reads (`shutdown(SHUT_WR)`, as `nc -N` or `socat` do
    /// at the end of their input): reading stops, the complete lines it sent are still handed to
    /// the handler, whose next request after them is nil; the handler then closes the connection
    /// once their replies are written (``closeWhenFlushed()``). A last line without its `\n` is
    /// not a request (PROTOCOL.md "Framing") and is dropped.
    private func peerEndedWriting() {
        var after: [() -> Void] = []
        lock.withLock {
            guard phase == .open, !peerHalfClosed else { return }
            peerHalfClosed = true
            readPaused = false
            reader?.cancel()
            if let k = waiting {
                var ignored = false
                let line = takeLineLocked(&ignored)
                waiting = nil
                after.append { k.resume(returning: line) }
            }
        }
        for a in after { a() }
    }

    /// Whether the peer shut the writing side and stopped reading (`close`, an exit, a crash) or
    /// shut only the writing side. For a Unix stream socket the kernel reports `POLLHUP` once both
    /// directions are shut: a peer that closed; without it, a peer that still reads. `POLLHUP` is
    /// reported whatever is asked for, so nothing is asked: a peer that reads but has let the
    /// replies fill its socket (no `POLLOUT`) is no closed peer (a stranger's find: taken for one,
    /// it lost every reply past the first 36 KB).
    private func peerHasClosed(_ fd: Int32) -> Bool {
        var p = pollfd(fd: fd, events: 0, revents: 0)
        // -1 (EINTR): taken as a peer that reads; if it has gone, the next write says so (EPIPE).
        return poll(&p, 1, 0) == 1 && p.revents & Int16(POLLHUP | POLLERR) != 0
    }

    /// Whether the peer half-closed (``peerEndedWriting()``): then the handler closes the
    /// connection after its last reply.
    var peerFinishedSending: Bool { lock.withLock { peerHalfClosed } }

    /// Over the line cap: one `tooLarge` reply, then close once it is written. Requests not yet
    /// handled are dropped (PROTOCOL.md "Framing").
    private func tooLargeLocked(_ after: inout [() -> Void]) {
        reader?.cancel()
        framer = LineFramer()
        phase = .draining
        if let k = waiting { waiting = nil; after.append { k.resume(returning: nil) } }
        let reply = ServerMessage.reply(WireReply(id: nil, error: WireError(.tooLarge,
            "a message may be at most \(LineFramer.defaultMaxLineBytes) bytes; closing the connection")))
        if let data = try? reply.encoded() { appendLocked(data) }
        flushLocked(&after)
    }

    // MARK: Messages out

    /// Queues a message for the peer (encoded on the connection's queue). Safe from any thread.
    func send(_ m: ServerMessage) { send { m } }

    /// Queues a message made and encoded on the connection's queue (an engine event whose data is
    /// encoded there, off the engine). Safe from any thread.
    ///
    /// When nothing is queued or waiting to be written before it, the message is made, encoded and
    /// written at once on the caller's thread instead: a thread woken per event cost more than the
    /// encoding (an app's `notificationDelivered` before each reply; issue 9).
    func send(_ make: @escaping @Sendable () -> ServerMessage) {
        send(encoded: { try? make().encoded() })
    }

    /// Queues a line made on the connection's queue (or at once, as ``send(_:)-(()->ServerMessage)``):
    /// an engine event's line (``EngineEvent/line``), encoded once for every connection that
    /// writes it, which then all hold the same bytes. nil: nothing is sent.
    func send(encoded make: @escaping @Sendable () -> Data?) {
        let idle: Bool? = lock.withLock {
            guard phase == .open else { return nil }
            // Behind paced lines: encoded now and queued behind them (``enqueue(_:paced:)``).
            if pacingLocked { return true }
            return inFlight == 0 && sendsQueued == 0 && (output.isEmpty || gathered)
        }
        guard let idle else { return }
        if idle, let data = make() {
            enqueue(data)
            return
        }
        guard lock.withLock({ () -> Bool in
            guard phase == .open else { return false }
            sendsQueued += 1
            return true
        }) else { return }
        queue.async { [self] in
            let data = make()
            var after: [() -> Void] = []
            lock.withLock {
                sendsQueued -= 1
                guard phase == .open, let data else { return }
                appendLocked(data)
                checkBoundLocked(&after)
                if phase == .open { flushLocked(&after) }
            }
            for a in after { a() }
        }
    }

    /// Queues a paced message (`paced` true: one part of a removal of many, PROTOCOL.md
    /// `notificationRemoved`), encoded now on the caller's thread; otherwise as ``send(_:)-(()->ServerMessage)``.
    ///
    /// A paced line that would take the output past `maxOutputBytes` does not close the
    /// connection: it waits in the paced lane, with every line sent after it (in order), and
    /// moves to the output as the peer reads (when the output is empty, or has room for it). The
    /// lane is bounded by `maxPacedBytes`; over it the peer is taken for one that does not read
    /// and the connection is closed. A removal's parts were all counted at once: a removal of
    /// 1,100 identifiers of 1 KiB (1.1 MB as written) closed the app's connection and every
    /// watcher's, and 100 did at `maxOutputBytes` 64 KiB (a stranger's find).
    func send(paced: Bool, _ make: @escaping @Sendable () -> ServerMessage) {
        send(paced: paced, encoded: { try? make().encoded() })
    }

    /// Queues a paced line (as ``send(paced:_:)``) made by `make`; nil: nothing is sent. Every
    /// connection that writes the same event holds the same bytes (``EngineEvent/line``): a
    /// removal waiting for many peers that do not read is held once, not once per peer.
    func send(paced: Bool, encoded make: @escaping @Sendable () -> Data?) {
        guard paced else { return send(encoded: make) }
        guard lock.withLock({ phase == .open }), let data = make() else { return }
        enqueue(data, paced: true)
    }

    /// Queues the reply `{"id": id, "result": result}` to a request whose result is already
    /// encoded (the keys in sorted order, as every line the daemon writes). `paced`: as
    /// ``send(paced:_:)`` (a `notification.remove` reply lists every identifier removed).
    func reply(id: JSONValue, result: Data, paced: Bool = false) {
        guard let idBytes = try? WireCoding.encode(id) else { return }
        var line = Data(#"{"id":"#.utf8)
        line.reserveCapacity(idBytes.count + result.count + 12)
        line += idBytes
        line += Data(#","result":"#.utf8)
        line += result
        line += Data("}".utf8)
        enqueue(line, paced: paced)
    }

    /// Queues a reply, encoded on the caller's task. Its bytes count toward `maxOutputBytes` from
    /// now on, before it is written: a peer that pipelines requests without reading is closed at
    /// the bound however fast replies are produced.
    func reply(_ m: ServerMessage) {
        guard let data = try? m.encoded() else { return }
        enqueue(data)
    }

    /// Counts an encoded line toward `maxOutputBytes` now and queues it for writing, in order.
    /// When nothing is queued before it, it is written at once on the caller's thread (as much as
    /// the socket takes; the rest by the write source): one thread hand-off less per reply, which
    /// also saves an audio request's reply the wait for a pool thread during a burst (issue 9).
    /// Inside an ``OutputGathering`` scope the line is appended and written when the scope ends,
    /// with the lines of the same scope.
    ///
    /// Behind paced lines (``send(paced:_:)``), or paced itself and over `maxOutputBytes`, the
    /// line waits in the paced lane instead.
    private func enqueue(_ data: Data, paced isPaced: Bool = false) {
        var after: [() -> Void] = []
        let scope = OutputGathering.current
        let queued: Bool = lock.withLock {
            guard phase == .open else { return false }
            if pacingLocked || (isPaced && pendingOutputLocked + data.count + 1 > limits.maxOutputBytes) {
                paced.append(data)
                pacedBytes += data.count + 1
                if pacedBytes > max(limits.maxPacedBytes, removalAllowance?.value ?? 0) {
                    let waiting = pacedBytes
                    after.append { [log, pid] in log("client pid \(pid) does not read (\(waiting) bytes of paced lines waiting); disconnecting") }
                    closeLocked(&after)
                } else if !gathered {
                    flushLocked(&after)
                }
                return false
            }
            if inFlight == 0, sendsQueued == 0, output.isEmpty || gathered {
                appendLocked(data)
                checkBoundLocked(&after)
                if phase == .open {
                    if let scope {
                        gathered = true
                        after.append { scope.hold(self) }
                    } else {
                        flushLocked(&after)
                    }
                }
                return false
            }
            inFlight += data.count + 1
            checkBoundLocked(&after)
            return phase == .open
        }
        for a in after { a() }
        guard queued else { return }
        queue.async { [self] in
            var after: [() -> Void] = []
            lock.withLock {
                inFlight -= data.count + 1
                guard phase == .open else { return }  // closing: a reply not yet queued is dropped
                appendLocked(data)
                flushLocked(&after)
            }
            for a in after { a() }
        }
    }

    private var pendingOutputLocked: Int { output.pendingBytes + inFlight }

    /// The paced lines waiting now, first to last (tests).
    var pacedLinesWaiting: [Data] { lock.withLock { Array(paced[pacedHead...]) } }

    /// The lines in the output not yet wholly written, first to last (tests).
    var outputLinesWaiting: [Data] { lock.withLock { Array(output.waiting) } }

    /// Whether a line sent now must queue in the paced lane, behind paced lines.
    private var pacingLocked: Bool { pacedHead < paced.count || pacedInOutput }

    /// Moves paced lines to the output while it has room for them (or is empty: a line over
    /// `maxOutputBytes`, a large `notification.remove` reply, goes alone), once the lines sent
    /// before them have all reached the output.
    private func movePacedLocked() {
        guard !paced.isEmpty, inFlight == 0, sendsQueued == 0 else { return }
        while pacedHead < paced.count {
            let line = paced[pacedHead]
            let pending = output.pendingBytes
            guard pending == 0 || pending + line.count + 1 <= limits.maxOutputBytes else { break }
            appendLocked(line)
            paced[pacedHead] = Data()
            pacedHead += 1
            pacedBytes -= line.count + 1
            pacedInOutput = true
        }
        if pacedHead == paced.count {
            paced.removeAll(keepingCapacity: false)
            pacedHead = 0
        } else if pacedHead >= 64, pacedHead * 2 >= paced.count {
            paced.removeFirst(pacedHead)
            pacedHead = 0
        }
    }

    private func appendLocked(_ data: Data) {
        output.append(data)
    }

    private func checkBoundLocked(_ after: inout [() -> Void]) {
        let pending = pendingOutputLocked
        guard pending > limits.maxOutputBytes else { return }
        after.append { [log, pid] in log("client pid \(pid) does not read (\(pending) bytes pending); disconnecting") }
        closeLocked(&after)
    }

    /// Writes the lines held for an ``OutputGathering`` scope (GatheredOutput).
    func flushGathered() {
        var after: [() -> Void] = []
        lock.withLock {
            guard gathered else { return }
            gathered = false
            if phase != .closed { flushLocked(&after) }
        }
        for a in after { a() }
    }

    private func writable() {
        var after: [() -> Void] = []
        lock.withLock { if phase != .closed { flushLocked(&after) } }
        for a in after { a() }
    }

    /// Writes what it can without blocking; turns the write source on while bytes wait for room,
    /// off when all is written; closes a draining connection once all is written.
    private func flushLocked(_ after: inout [() -> Void]) {
        while true {
            movePacedLocked()
            guard !output.isEmpty else { break }
            switch output.write(to: fd) {
            case .allWritten: continue  // paced lines may move in now
            case .full:
                writer?.turnOn()
                return
            case .failed:
                closeLocked(&after)
                return
            }
        }
        pacedInOutput = false
        writer?.turnOff()
        if phase == .draining { closeLocked(&after) }
    }

    // MARK: Closing

    /// Stops reading for good (the daemon is stopping): requests received but not yet handed to
    /// the handler are dropped unanswered (never decided, so never saved), the handler's next
    /// request is nil, and what is sent from now on (the replies of requests being decided, the
    /// events of their commits) is still written, until ``closeWhenFlushed()`` or ``close()``.
    func stopReading() {
        var after: [() -> Void] = []
        lock.withLock {
            guard phase == .open, !readingStopped else { return }
            readingStopped = true
            reader?.cancel()
            framer = LineFramer()
            if let k = waiting { waiting = nil; after.append { k.resume(returning: nil) } }
        }
        for a in after { a() }
    }

    /// Closes once what is queued has been written (messages sent before this are written first).
    func closeWhenFlushed() {
        queue.async { [self] in
            var after: [() -> Void] = []
            lock.withLock {
                guard phase == .open else { return }
                phase = .draining
                reader?.cancel()
                if let k = waiting { waiting = nil; after.append { k.resume(returning: nil) } }
                flushLocked(&after)
            }
            for a in after { a() }
        }
    }

    func close() { queue.async { [self] in closeNow() } }

    private func closeNow() {
        var after: [() -> Void] = []
        lock.withLock { closeLocked(&after) }
        for a in after { a() }
    }

    /// Cancels both sources (the fd is closed when both are off it), frees the buffers, ends the
    /// requests, and calls `onClose` (after the lock is released).
    private func closeLocked(_ after: inout [() -> Void]) {
        guard phase != .closed else { return }
        phase = .closed
        reader?.cancel()
        writer?.cancel()
        if reader == nil { closeDiscardingUnread(fd) }  // never started: no source owns the fd
        framer = LineFramer()
        output.removeAll()
        paced = []
        pacedHead = 0
        pacedBytes = 0
        if let k = waiting { waiting = nil; after.append { k.resume(returning: nil) } }
        if let onClose { after.append(onClose) }
    }
}

/// Runs a task's jobs on a connection's serial queue (a task executor preference, SE-0417): the
/// connection's request handler runs where its lines are read. A line that arrives for a handler
/// waiting for it resumes the handler right after the read, on the same thread, and the handler
/// comes back from an engine call that ran on its thread (``EngineExecutor`` runs a job on the
/// thread that enqueues it when the engine is free) without waking another: on Swift's pool each
/// of those was a thread woken (issue 9: a request waiting for its handler's wake-up was a
/// quarter of an activation's round trip).
final class ConnectionTaskExecutor: TaskExecutor, @unchecked Sendable {
    let queue: DispatchQueue
    init(queue: DispatchQueue) { self.queue = queue }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
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
        if last { closeDiscardingUnread(fd) }
    }
}

/// Closes a connection's socket after reading away what the peer sent and the daemon did not read
/// (requests dropped at `tooLarge` or at shutdown, PROTOCOL.md): a Unix socket closed with unread
/// bytes makes the peer's next read fail with ECONNRESET instead of seeing the end of the stream,
/// so a client could not tell a daemon that closed from one that broke. Reading is shut first, so
/// the peer can add nothing from then on (its writes fail with EPIPE) and what is queued (the
/// socket's buffers, a few hundred KiB) is all there is to read away; 16 MiB at most, as a bound.
/// Non-blocking (`MSG_DONTWAIT`).
func closeDiscardingUnread(_ fd: Int32) {
    _ = shutdown(fd, Int32(SHUT_RD))
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16384) { buf in
        var discarded = 0
        while discarded < 16 << 20 {
            let n = recv(fd, buf.baseAddress, buf.count, Int32(MSG_DONTWAIT))
            if n > 0 { discarded += n; continue }
            if n < 0 && errno == EINTR { continue }
            break  // 0: all read (reading is shut); EAGAIN or an error: nothing more to take
        }
    }
    _ = Glibc.close(fd)
}
