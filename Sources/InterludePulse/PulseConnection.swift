import CPulse
import Foundation
import Dispatch

/// A sink input's description together with its raw per-channel volume.
struct SinkInputSnapshot {
    var input: PulseSinkInput
    var volumes: [pa_volume_t]
}

/// What the adapter knows about a sink input it applies a gain to (A7: the gain multiplies the
/// user's volume; it never records and restores an absolute volume).
struct GainState {
    /// The user's volume per channel: the last volume on the server that the adapter did not write.
    var user: [pa_volume_t]
    /// The gain applied on top, dB.
    var gainDb: Double
    /// The last volume the adapter wrote and the server acknowledged. An info reply is ordered after
    /// every acknowledgement of a write sent before it, so a reply showing anything else is a write
    /// by someone else: the user's.
    var lastConfirmed: [pa_volume_t]
    /// Bumped by every `rampGain` call: a ramp that sees a newer value has been superseded.
    var generation: Int
    init(user: [pa_volume_t], gainDb: Double, lastConfirmed: [pa_volume_t], generation: Int) {
        self.user = user; self.gainDb = gainDb; self.lastConfirmed = lastConfirmed; self.generation = generation
    }

    /// Whether `observed` is the volume the adapter itself wrote last (an info reply is ordered
    /// after the acknowledgements of every write sent before it).
    func isOurs(_ observed: [pa_volume_t]) -> Bool { sameVolume(observed, lastConfirmed) }
}

/// A connection to a PulseAudio server: one `pa_threaded_mainloop` and one `pa_context`.
///
/// Thread safety: every `pa_*` call made from outside the mainloop thread holds the mainloop lock;
/// callbacks (which run on the mainloop thread with the lock held) only copy data, signal waiters or
/// yield to ``events`` (DESIGN.md "Audio mechanics"). All mutable state below is guarded by the same
/// lock. Blocking methods must not be called from the mainloop thread (they throw `wrongThread`).
public final class PulseConnection: @unchecked Sendable {
    let mainloop: OpaquePointer
    private let server: String?
    private let clientName: String
    private let clientProperties: [String: String]
    /// The claim this connection announces on every (re)connect (``PulseClaim``), if any.
    public let claim: PulseClaim?
    private let eventSink: AsyncStream<PulseEvent>.Continuation

    /// Sink-input changes and connection state, in server order. One consumer; buffers the newest
    /// 4096 events if nobody reads (older ones are dropped). Finishes on `disconnect()`.
    public let events: AsyncStream<PulseEvent>

    // Guarded by the mainloop lock.
    private var started = false
    private var closed = false
    private(set) var context: OpaquePointer?
    private var ready = false
    private var reconnectEnabled = false
    private var reconnectScheduled = false
    private var reconnectDelay = PulseConnection.firstReconnectDelay
    private var knownSinkInputs: Set<UInt32> = []
    var clientPIDs: [UInt32: Int32] = [:]
    var gains: [UInt32: GainState] = [:]
    /// Told every user volume the adapter starts to track or sees change (A7); see
    /// ``observeUserVolumes(_:)``. Called on the mainloop thread with the lock held.
    var userVolumeObserver: (@Sendable (UInt32, [UInt32]) -> Void)?
    /// `server_name` of the server this context talks to, asked for on every connect; nil until the
    /// answer arrives (``connect(timeout:)`` waits for it).
    private(set) var serverNameLocked: String?
    /// On PipeWire, the samples this connection uploaded, by name: it plays them itself (see
    /// `playSample`).
    var samplePCM: [String: CachedPCM] = [:]
    /// Samples playing through the adapter's own streams (PipeWire), kept alive until drained.
    var samplePlaybacks: [ObjectIdentifier: SamplePlayback] = [:]

    static let firstReconnectDelay = 0.1
    static let maxReconnectDelay = 5.0
    /// How long a blocking call waits for the server before throwing `timeout`.
    public static let operationTimeout = 10.0

    /// Makes a connection (not yet connected: call ``connect(timeout:)``).
    ///
    /// - Parameters:
    ///   - server: a server string such as `unix:/run/pa.sock`; nil uses `PULSE_SERVER` or libpulse's
    ///     default lookup.
    ///   - clientName: `application.name` of this client.
    ///   - properties: more client properties. libpulse adds `application.process.id` and the like
    ///     itself; the server merges client properties into each stream's.
    ///   - claim: a claim to announce in the client properties, stamped anew on every connect
    ///     (``PulseClaim``; the daemon's "one manager per audio server and user").
    public init(server: String? = nil, clientName: String, properties: [String: String] = [:], claim: PulseClaim? = nil) {
        guard let loop = pa_threaded_mainloop_new() else {
            fatalError("pa_threaded_mainloop_new failed: out of memory")
        }
        mainloop = loop
        self.server = server
        self.clientName = clientName
        self.clientProperties = properties
        self.claim = claim
        (events, eventSink) = AsyncStream.makeStream(of: PulseEvent.self, bufferingPolicy: .bufferingNewest(4096))
    }

    deinit {
        disconnect()
        pa_threaded_mainloop_free(mainloop)
    }

    /// The server's `server_name` (e.g. "pulseaudio", "PulseAudio (on PipeWire 0.3.65)"); nil while
    /// not connected.
    public var serverName: String? { withLock { serverNameLocked } }

    /// PulseAudio or PipeWire; nil while not connected.
    public var serverKind: PulseServerKind? { withLock { serverKindLocked } }

    var serverKindLocked: PulseServerKind? { serverNameLocked.map(PulseServerKind.init(serverName:)) }

    // MARK: Locking

    var inMainloopThread: Bool { pa_threaded_mainloop_in_thread(mainloop) != 0 }

    /// Runs `body` holding the mainloop lock (recursive: also fine inside callbacks).
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        return try body()
    }

    private final class Deadline: @unchecked Sendable { var passed = false }

    /// Waits (lock held) until `condition` holds or `timeout` seconds pass; false on timeout.
    /// `pa_threaded_mainloop_wait` wakes spuriously, so this loops on the condition.
    func waitLocked(timeout: Double, until condition: () -> Bool) -> Bool {
        if condition() { return true }
        let deadline = Deadline()
        let loop = mainloop
        let timer = DispatchWorkItem { [weak self] in
            guard self != nil else { return }
            pa_threaded_mainloop_lock(loop)
            deadline.passed = true
            pa_threaded_mainloop_signal(loop, 0)
            pa_threaded_mainloop_unlock(loop)
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: timer)
        defer { timer.cancel() }
        while !condition() {
            if deadline.passed { return false }
            pa_threaded_mainloop_wait(loop)
        }
        return true
    }

    /// `pa_context_errno(context)` if `context` is still the connection's (lock held), else
    /// `PA_ERR_CONNECTIONTERMINATED`. A caller that waited (``waitLocked(timeout:until:)`` lets go of
    /// the lock) may hold a context that `disconnect()` or a reconnect dropped and freed meanwhile:
    /// reading its error then aborted the daemon in libpulse (`pa_context_errno` asserts the
    /// context's reference count), when a SIGTERM came during the start's sample uploads.
    func contextErrnoLocked(_ context: OpaquePointer) -> Int32 {
        self.context == context ? pa_context_errno(context) : Int32(PA_ERR_CONNECTIONTERMINATED.rawValue)
    }

    /// The context if it is ready for operations.
    func readyContextLocked() -> OpaquePointer? {
        guard ready, let context, pa_context_get_state(context) == PA_CONTEXT_READY else { return nil }
        return context
    }

    // MARK: Operations

    /// Issues an operation (lock held); the box finishes when the server answers or the context goes.
    func startLocked(_ what: String, prepare: (Operation) -> Void = { _ in },
                     _ issue: (OpaquePointer, UnsafeMutableRawPointer) -> OpaquePointer?) throws -> Operation {
        guard let context = readyContextLocked() else { throw PulseError.notConnected("\(what): not connected") }
        let box = Operation(connection: self, what: what)
        prepare(box)
        let userdata = box.retainForCallbacks()
        guard let op = issue(context, userdata) else {
            let errno = pa_context_errno(context)
            box.abandon()
            throw PulseError.fromPulse(errno, what)
        }
        box.handle = op
        pa_operation_set_state_callback(op, operationStateCallback, userdata)
        return box
    }

    /// Issues an operation and blocks until it finishes; then `result` reads the box.
    func perform<R>(_ what: String, _ issue: (OpaquePointer, UnsafeMutableRawPointer) -> OpaquePointer?,
                    result: (Operation) throws -> R) throws -> R {
        guard !inMainloopThread else { throw PulseError.wrongThread }
        return try withLock {
            let box = try startLocked(what, issue)
            if !waitLocked(timeout: Self.operationTimeout, until: { box.done }) {
                if let handle = box.handle { pa_operation_cancel(handle) }  // finishes the box
                throw PulseError.timeout("\(what): no answer from the server within \(Self.operationTimeout) s")
            }
            try box.check()
            return try result(box)
        }
    }

    /// Issues an operation and suspends until it finishes (no thread blocks meanwhile).
    func performAsync<R: Sendable>(_ what: String, _ issue: (OpaquePointer, UnsafeMutableRawPointer) -> OpaquePointer?,
                                   result: @escaping @Sendable (Operation) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, Error>) in
            withLock {
                do {
                    _ = try startLocked(what, prepare: { box in
                        box.onFinish = { box in
                            continuation.resume(with: Result { try box.check(); return try result(box) })
                        }
                    }, issue)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    // MARK: Connecting

    /// Connects and blocks until the context is ready. Emits ``PulseEvent/connected`` and then
    /// `sinkInputAdded` for every existing sink input.
    ///
    /// - Parameter timeout: seconds to wait for the server.
    /// - Throws: `connectionFailed` (refused, no such socket), `timeout`, `wrongThread`.
    public func connect(timeout: Double = 5) throws {
        guard !inMainloopThread else { throw PulseError.wrongThread }
        try withLock {
            guard !closed else { throw PulseError.notConnected("connect: the connection was closed") }
            if readyContextLocked() != nil { return }
            if !started {
                guard pa_threaded_mainloop_start(mainloop) >= 0 else {
                    throw PulseError.connectionFailed("pa_threaded_mainloop_start failed")
                }
                started = true
            }
            dropContextLocked()
            let context = try startContextLocked()
            let finished = waitLocked(timeout: timeout) {
                let state = pa_context_get_state(context)
                return state == PA_CONTEXT_READY || state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED
            }
            if ready {
                // The server's name tells PulseAudio from PipeWire (see `serverKind`); it was asked
                // for as the context became ready and answers within a round trip.
                _ = waitLocked(timeout: timeout) { serverNameLocked != nil || self.context != context || !ready }
                return
            }
            let errno = contextErrnoLocked(context)
            if self.context == context { dropContextLocked() }
            if !finished {
                throw PulseError.timeout("connect to \(serverDescription): no answer within \(timeout) s")
            }
            throw PulseError.connectionFailed(PulseError.fromPulse(errno, "connect to \(serverDescription)").message)
        }
    }

    private var serverDescription: String { server ?? "the default server" }

    /// Creates a context and starts connecting it (lock held).
    private func startContextLocked() throws -> OpaquePointer {
        var properties = clientProperties
        properties["application.name"] = clientName
        if let claim { properties.merge(claim.properties(since: PulseClaim.nowNanoseconds())) { _, new in new } }
        let list = try makeProplist(properties)
        defer { pa_proplist_free(list) }
        guard let context = pa_context_new_with_proplist(pa_threaded_mainloop_get_api(mainloop), clientName, list) else {
            throw PulseError.connectionFailed("pa_context_new failed")
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        pa_context_set_state_callback(context, contextStateCallback, me)
        pa_context_set_subscribe_callback(context, subscribeCallback, me)
        self.context = context
        if pa_context_connect(context, server, PA_CONTEXT_NOAUTOSPAWN, nil) < 0 {
            let errno = pa_context_errno(context)
            dropContextLocked()
            throw PulseError.connectionFailed(PulseError.fromPulse(errno, "connect to \(serverDescription)").message)
        }
        return context
    }

    /// Disconnects and frees the current context, if any, without callbacks (lock held).
    private func dropContextLocked() {
        guard let context else { return }
        self.context = nil
        ready = false
        serverNameLocked = nil
        pa_context_set_state_callback(context, nil, nil)
        pa_context_set_subscribe_callback(context, nil, nil)
        pa_context_disconnect(context)  // cancels pending operations: their boxes finish as cancelled
        pa_context_unref(context)
    }

    /// Keeps the connection: when the server goes away, emits ``PulseEvent/disconnected``, retries with
    /// backoff (0.1 s doubling to 5 s) and emits ``PulseEvent/connected`` when back. Call after
    /// ``connect(timeout:)``; if not connected at the time, the first attempt starts at once.
    public func enableReconnect() {
        withLock {
            guard !closed else { return }
            reconnectEnabled = true
            if !started {
                guard pa_threaded_mainloop_start(mainloop) >= 0 else { return }
                started = true
            }
            if context == nil || (!ready && isDeadLocked) { scheduleReconnectLocked(after: 0) }
        }
    }

    private var isDeadLocked: Bool {
        guard let context else { return true }
        let state = pa_context_get_state(context)
        return state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED
    }

    private func scheduleReconnectLocked(after delay: Double? = nil) {
        guard reconnectEnabled, !closed, !reconnectScheduled else { return }
        reconnectScheduled = true
        let wait = delay ?? reconnectDelay
        if delay == nil { reconnectDelay = min(Self.maxReconnectDelay, reconnectDelay * 2) }
        DispatchQueue.global().asyncAfter(deadline: .now() + wait) { [weak self] in self?.attemptReconnect() }
    }

    private func attemptReconnect() {
        withLock {
            reconnectScheduled = false
            guard reconnectEnabled, !closed, !ready else { return }
            if context != nil && !isDeadLocked { return }  // an attempt is in progress
            dropContextLocked()
            do { _ = try startContextLocked() } catch { scheduleReconnectLocked() }
        }
    }

    /// Closes the connection: no more reconnects, `events` finishes, pending operations fail with
    /// `notConnected`. Idempotent. Must not be called from the mainloop thread.
    public func disconnect() {
        let stop: Bool = withLock {
            guard !closed else { return false }
            closed = true
            reconnectEnabled = false
            dropContextLocked()
            return started
        }
        if stop && !inMainloopThread { pa_threaded_mainloop_stop(mainloop) }  // unlocked, as required
        eventSink.finish()
    }

    // MARK: Context callbacks (mainloop thread, lock held)

    fileprivate func contextStateChangedLocked(_ context: OpaquePointer) {
        defer { pa_threaded_mainloop_signal(mainloop, 0) }
        guard context == self.context else { return }
        switch pa_context_get_state(context) {
        case PA_CONTEXT_READY:
            ready = true
            reconnectDelay = Self.firstReconnectDelay
            eventSink.yield(.connected)
            let mask = PA_SUBSCRIPTION_MASK_SINK_INPUT.rawValue | PA_SUBSCRIPTION_MASK_CLIENT.rawValue
            let me = Unmanaged.passUnretained(self).toOpaque()
            release(pa_context_subscribe(context, pa_subscription_mask_t(rawValue: mask), nil, nil))
            // Clients first: their replies come back before the sink inputs', so the pid cache is
            // filled when sink inputs are described.
            release(pa_context_get_client_info_list(context, clientEventCallback, me))
            release(pa_context_get_sink_input_info_list(context, sinkInputEventCallback, me))
            release(pa_context_get_server_info(context, serverNameCallback, me))
        case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED:
            if ready {
                ready = false
                serverNameLocked = nil
                knownSinkInputs.removeAll()
                clientPIDs.removeAll()
                gains.removeAll()
                samplePCM.removeAll()
                eventSink.yield(.disconnected)
            }
            scheduleReconnectLocked()
        default:
            break
        }
    }

    fileprivate func subscriptionEventLocked(_ context: OpaquePointer, _ type: pa_subscription_event_type_t, _ index: UInt32) {
        guard context == self.context else { return }
        let facility = type.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue
        let kind = type.rawValue & PA_SUBSCRIPTION_EVENT_TYPE_MASK.rawValue
        let me = Unmanaged.passUnretained(self).toOpaque()
        switch (facility, kind) {
        case (PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue, PA_SUBSCRIPTION_EVENT_REMOVE.rawValue):
            gains[index] = nil
            if knownSinkInputs.remove(index) != nil { eventSink.yield(.sinkInputRemoved(index)) }
        case (PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue, _):
            release(pa_context_get_sink_input_info(context, index, sinkInputEventCallback, me))
        case (PA_SUBSCRIPTION_EVENT_CLIENT.rawValue, PA_SUBSCRIPTION_EVENT_REMOVE.rawValue):
            clientPIDs[index] = nil
            eventSink.yield(.clientRemoved(index))
        case (PA_SUBSCRIPTION_EVENT_CLIENT.rawValue, _):
            // New, or changed: PulseAudio announces a client before it has sent its name and
            // properties, which come as a change.
            release(pa_context_get_client_info(context, index, clientEventCallback, me))
        default:
            break
        }
    }

    fileprivate func serverDescribedLocked(_ context: OpaquePointer, _ info: pa_server_info) {
        guard context == self.context else { return }
        serverNameLocked = info.server_name.map { String(cString: $0) } ?? ""
        pa_threaded_mainloop_signal(mainloop, 0)
    }

    fileprivate func clientDescribedLocked(_ info: pa_client_info) {
        let properties = readProplist(info.proplist)
        if let pid = processID(in: properties) { clientPIDs[info.index] = pid }
        eventSink.yield(.clientChanged(PulseClient(index: info.index, properties: properties)))
    }

    /// A sink input described after an event: applies A7 (a volume the adapter did not write is the
    /// user's new volume; the gain is re-applied on top), then reports it.
    fileprivate func sinkInputDescribedLocked(_ info: pa_sink_input_info) {
        let index = info.index
        let observed = channelVolumes(info.volume)
        if adoptUserVolumeLocked(index, observed), let gain = gains[index], gain.gainDb != 0 {
            writeVolumeLocked(index, applyGain(observed, gainDb: gain.gainDb))
        }
        let snapshot = snapshotLocked(info)
        let isNew = knownSinkInputs.insert(index).inserted
        eventSink.yield(isNew ? .sinkInputAdded(snapshot.input) : .sinkInputChanged(snapshot.input))
    }

    /// A7: if the adapter applies a gain to this sink input and `observed` is not a volume it wrote,
    /// `observed` is the user's new volume. Returns whether it was. Lock held.
    @discardableResult
    func adoptUserVolumeLocked(_ index: UInt32, _ observed: [pa_volume_t]) -> Bool {
        guard var gain = gains[index], !gain.isOurs(observed) else { return false }
        gain.user = observed
        gain.lastConfirmed = observed
        gains[index] = gain
        userVolumeObserver?(index, observed)
        return true
    }

    /// Describes a sink input with what the adapter knows (client pids, gains). Lock held.
    func snapshotLocked(_ info: pa_sink_input_info) -> SinkInputSnapshot {
        let properties = readProplist(info.proplist)
        let volumes = channelVolumes(info.volume)
        let client: UInt32? = info.client == invalidIndex ? nil : info.client
        let volumeDb = averageDb(volumes)
        let gain = gains[info.index]
        let input = PulseSinkInput(
            index: info.index,
            clientIndex: client,
            processID: processID(in: properties) ?? client.flatMap { clientPIDs[$0] },
            sessionTag: properties["interlude.session"],
            role: properties["media.role"],
            applicationName: properties["application.name"],
            corked: info.corked != 0,
            muted: info.mute != 0,
            volumeDb: volumeDb,
            userVolumeDb: gain.map { averageDb($0.user) } ?? volumeDb,
            gainDb: gain?.gainDb ?? 0,
            properties: properties)
        return SinkInputSnapshot(input: input, volumes: volumes)
    }

    /// Writes a sink input's volume (lock held); on the server's acknowledgement, records it as the
    /// adapter's own write and calls `completion`.
    func writeVolumeLocked(_ index: UInt32, _ volumes: [pa_volume_t],
                           completion: (@Sendable (Result<Void, Error>) -> Void)? = nil) {
        do {
            _ = try startLocked("set volume of sink input \(index)", prepare: { box in
                box.onFinish = { box in
                    let outcome = Result { try box.check() }
                    if case .success = outcome, var gain = box.connection.gains[index] {
                        gain.lastConfirmed = volumes
                        box.connection.gains[index] = gain
                    }
                    completion?(outcome)
                }
            }) { context, userdata in
                var cv = makeCVolume(volumes)
                return pa_context_set_sink_input_volume(context, index, &cv, contextSuccessCallback, userdata)
            }
        } catch {
            completion?(.failure(error))
        }
    }

    fileprivate func release(_ op: OpaquePointer?) {
        if let op { pa_operation_unref(op) }
    }
}

// Context callbacks: file scope, nonisolated (DESIGN.md "Swift 6 callback trap").

private func connection(_ userdata: UnsafeMutableRawPointer?) -> PulseConnection? {
    userdata.map { Unmanaged<PulseConnection>.fromOpaque($0).takeUnretainedValue() }
}

private let contextStateCallback: pa_context_notify_cb_t = { context, userdata in
    guard let context, let me = connection(userdata) else { return }
    me.contextStateChangedLocked(context)
}

private let subscribeCallback: pa_context_subscribe_cb_t = { context, type, index, userdata in
    guard let context, let me = connection(userdata) else { return }
    me.subscriptionEventLocked(context, type, index)
}

private let sinkInputEventCallback: pa_sink_input_info_cb_t = { context, info, _, userdata in
    guard let context, let info, let me = connection(userdata), context == me.context else { return }
    me.sinkInputDescribedLocked(info.pointee)
}

private let serverNameCallback: pa_server_info_cb_t = { context, info, userdata in
    guard let context, let info, let me = connection(userdata) else { return }
    me.serverDescribedLocked(context, info.pointee)
}

private let clientEventCallback: pa_client_info_cb_t = { context, info, _, userdata in
    guard let context, let info, let me = connection(userdata), context == me.context else { return }
    me.clientDescribedLocked(info.pointee)
}
