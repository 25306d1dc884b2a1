import CPulse

/// One pending libpulse operation: what its callbacks deliver and how it finishes, exactly once.
///
/// Every field is read and written under the mainloop lock only (callbacks run with it held). The
/// box is retained for libpulse from the moment the operation is issued until it finishes, which
/// always happens: the operation reaches `PA_OPERATION_DONE`, or `PA_OPERATION_CANCELLED` when the
/// context goes away or a waiter gives up (`pa_operation_set_state_callback` reports both).
///
/// The box does not keep its connection alive (so that the connection is never freed from the
/// mainloop thread when a box is released there): boxes cannot outlive it, because `disconnect()`,
/// which `deinit` calls, cancels every pending operation.
final class Operation: @unchecked Sendable {
    unowned(unsafe) let connection: PulseConnection
    let what: String
    var done = false
    var cancelled = false
    /// `pa_context_errno` when the server reported failure.
    var failure: Int32?
    var handle: OpaquePointer?
    /// Runs once, on finishing, with the lock held.
    var onFinish: ((Operation) -> Void)?
    private var retained: Unmanaged<Operation>?

    // What the callbacks deliver.
    var sinkInputs: [SinkInputSnapshot] = []
    var clientPIDs: [UInt32: Int32] = [:]
    /// Every client listed, with its properties (`pa_context_get_client_info_list`).
    var clients: [PulseClient] = []
    var index: UInt32 = invalidIndex
    var text: String?
    var flag = false
    var found = false
    /// A source's channel count and map (`pa_context_get_source_info_by_name`).
    var channelMap: pa_channel_map?

    init(connection: PulseConnection, what: String) {
        self.connection = connection
        self.what = what
    }

    /// The userdata pointer for libpulse; keeps the box alive until `finish()`.
    func retainForCallbacks() -> UnsafeMutableRawPointer {
        let unmanaged = Unmanaged.passRetained(self)
        retained = unmanaged
        return unmanaged.toOpaque()
    }

    /// Finishes (once): runs `onFinish`, wakes waiters, drops libpulse's references.
    func finish() {
        guard !done else { return }
        done = true
        let callback = onFinish
        onFinish = nil
        callback?(self)
        pa_threaded_mainloop_signal(connection.mainloop, 0)
        if let handle {
            self.handle = nil
            pa_operation_unref(handle)
        }
        let keep = retained
        retained = nil
        keep?.release()
    }

    /// For an operation that could not even be issued.
    func abandon() {
        done = true
        onFinish = nil
        retained?.release()
        retained = nil
    }

    /// Throws what went wrong, if anything.
    func check() throws {
        if let failure { throw PulseError.fromPulse(failure, what) }
        if cancelled { throw PulseError.notConnected("\(what): the connection went away before the server answered") }
    }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> Operation? {
        userdata.map { Unmanaged<Operation>.fromOpaque($0).takeUnretainedValue() }
    }
}

// The C callbacks. They run on the mainloop thread with the lock held; they only copy data into the
// box and finish it (DESIGN.md: callbacks in nonisolated library code, never in main-actor code).

let operationStateCallback: pa_operation_notify_cb_t = { op, userdata in
    guard let op, let box = Operation.from(userdata) else { return }
    switch pa_operation_get_state(op) {
    case PA_OPERATION_DONE: box.finish()
    case PA_OPERATION_CANCELLED:
        box.cancelled = true
        box.finish()
    default: break
    }
}

let contextSuccessCallback: pa_context_success_cb_t = { context, success, userdata in
    guard let box = Operation.from(userdata) else { return }
    if success == 0 { box.failure = pa_context_errno(context) }
}

let streamSuccessCallback: pa_stream_success_cb_t = { stream, success, userdata in
    guard let box = Operation.from(userdata) else { return }
    if success == 0 { box.failure = pa_context_errno(pa_stream_get_context(stream)) }
}

let sinkInputListCallback: pa_sink_input_info_cb_t = { context, info, eol, userdata in
    guard let box = Operation.from(userdata) else { return }
    if eol < 0 { box.failure = pa_context_errno(context) }
    if let info { box.sinkInputs.append(box.connection.snapshotLocked(info.pointee)) }
}

let clientListCallback: pa_client_info_cb_t = { context, info, eol, userdata in
    guard let box = Operation.from(userdata) else { return }
    if eol < 0 { box.failure = pa_context_errno(context) }
    guard let info else { return }
    let properties = readProplist(info.pointee.proplist)
    if let pid = processID(in: properties) { box.clientPIDs[info.pointee.index] = pid }
    box.clients.append(PulseClient(index: info.pointee.index, properties: properties))
}

let sinkInfoCallback: pa_sink_info_cb_t = { context, info, eol, userdata in
    guard let box = Operation.from(userdata) else { return }
    if eol < 0 { box.failure = pa_context_errno(context) }
    if let info {
        box.found = true
        box.flag = info.pointee.mute != 0
        box.text = info.pointee.monitor_source_name.map { String(cString: $0) }
    }
}

let sourceInfoCallback: pa_source_info_cb_t = { context, info, eol, userdata in
    guard let box = Operation.from(userdata) else { return }
    if eol < 0 { box.failure = pa_context_errno(context) }
    if let info {
        box.found = true
        box.channelMap = info.pointee.channel_map
    }
}

let serverInfoCallback: pa_server_info_cb_t = { _, info, userdata in
    guard let box = Operation.from(userdata) else { return }
    box.text = info?.pointee.default_sink_name.map { String(cString: $0) }
}

let playSampleCallback: pa_context_play_sample_cb_t = { context, index, userdata in
    guard let box = Operation.from(userdata) else { return }
    box.index = index
    if index == invalidIndex { box.failure = pa_context_errno(context) }
}
