/// The pure notification delivery policy (POLICY.md N1–N14, N16, N17; N15's late delivery).
///
/// `(state, event, now) → (state, [effect])`: no I/O, no clock reads, no Dispatch. The engine owns
/// the `NotificationState`, calls `reduce` for each event in order with the current wall-clock time,
/// carries out the effects, and sleeps until `nextDeadline` to send `.tick`.
public enum NotificationPolicy {
    /// The furthest ahead a trigger or a focus end may be, in seconds (10 years of 365.25 days):
    /// further is refused as `badRequest`, so that no deadline is out of any clock's range.
    public static let maximumScheduleSeconds: Double = 10 * 365.25 * 86400

    /// The largest badge (N12): 2^31 − 1, what a 32-bit count holds (the CLI's limit, and what a
    /// desktop shows as a number at all). A larger `badge` or `count` is `badRequest`; a badge at
    /// the largest stays there when a notification would count it up.
    public static let maximumBadge = Int(Int32.max)

    /// The longest notification identifier, in UTF-8 bytes (1 KiB): room for a URL or a hash with
    /// a prefix, while a list of pending or delivered ones and a log line stay readable. A longer
    /// `identifier` is `badRequest`, as is one holding a control character or a line separator
    /// (``breaksALine(_:)``: an identifier is shown and logged on one line). A stranger's find: a
    /// 60 KB identifier was taken and logged whole.
    public static let maximumIdentifierBytes = 1024

    /// Whether `u` has no place in one line of text: the C0 controls (U+0000…U+001F), DEL, the C1
    /// controls (U+0080…U+009F, NEL among them) and the Unicode line and paragraph separators
    /// (U+2028, U+2029). What a notification identifier may not hold.
    public static func breaksALine(_ u: Unicode.Scalar) -> Bool {
        u.value < 0x20 || (0x7F...0x9F).contains(u.value) || u.value == 0x2028 || u.value == 0x2029
    }

    /// `u` as Unicode writes a code point, at least four hex digits: `U+000A`, `U+2028`. How a
    /// refusal names a character ``breaksALine(_:)`` finds.
    public static func codePoint(_ u: Unicode.Scalar) -> String {
        let hex = String(u.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// Applies one event at `now` and returns what the engine must do, in order.
    ///
    /// First advances to `now`: everything due since `state.clock` (fired triggers, schedule
    /// boundaries, summary times, released coalesced updates) is processed in time order; then the
    /// event is handled. Every event except `tick`, `appConnected`, `appDisconnected` and
    /// `setCallActive` yields exactly one `.reply`.
    /// - Parameters:
    ///   - state: the policy state, changed in place.
    ///   - event: what happened.
    ///   - now: the current wall-clock time (seconds since the Unix epoch).
    ///   - config: the rules' numbers and lists.
    public static func reduce(_ state: inout NotificationState, _ event: NotificationEvent, now: NotificationTime,
                              config: NotificationPolicyConfig) -> [NotificationEffect] {
        var reducer = NotificationReducer(state: state, config: config)
        reducer.advance(to: now)
        reducer.handle(event, at: now)
        state = reducer.state
        return reducer.effects
    }

    /// The next instant at which the policy needs a `.tick` (a trigger, a focus override or
    /// schedule boundary, a summary time while something is held, the end of a coalescing window),
    /// or nil if nothing is scheduled. May be in the past if something is overdue: tick at once.
    /// Before the first event (`state.clock == nil`) schedules are not considered.
    public static func nextDeadline(_ state: NotificationState, config: NotificationPolicyConfig) -> NotificationTime? {
        let reducer = NotificationReducer(state: state, config: config)
        return reducer.nextDue(after: state.clock)?.time
    }

    /// A delivered notification as watchers see it: the body replaced by the category's
    /// placeholder (or `placeholderText`) when the app's previews are `never` (N13).
    public static func view(of notification: DeliveredNotification, in state: NotificationState,
                            config: NotificationPolicyConfig) -> NotificationView {
        NotificationReducer(state: state, config: config).view(of: notification)
    }

    /// The latest decision about an app's notification (N16): from the decision log (which also
    /// keeps rejections and holds), else from the center. Nil if none is known.
    public static func explain(app: String, identifier: String, in state: NotificationState) -> NotificationDecision? {
        if let r = state.decisionLog.last(where: { $0.app == app && $0.identifier == identifier }) { return r.decision }
        return state.lastDeliveredIndex(of: identifier, app: app).map { state.delivered[$0].decision }
    }

    /// Every decision known about one notification, oldest first (N16): those of the center entry
    /// and of the entries it replaced (N10), and those still in the decision log (holds,
    /// refusals, deliveries), each once.
    public static func history(app: String, identifier: String, in state: NotificationState) -> [NotificationDecisionRecord] {
        var records: [NotificationDecisionRecord] = []
        if let e = state.lastDeliveredIndex(of: identifier, app: app).map({ state.delivered[$0] }) {
            records = (e.earlierDecisions ?? []) + [NotificationDecisionRecord(app: app, identifier: identifier, time: e.deliveredAt, decision: e.decision)]
        }
        for r in state.decisionLog where r.app == app && r.identifier == identifier && !records.contains(r) { records.append(r) }
        return records.sorted { $0.time < $1.time }
    }
}

/// One `reduce` call's working set: the state being changed, the config, the wall clock of the
/// config's time zone, and the effects so far.
struct NotificationReducer {
    var state: NotificationState
    let config: NotificationPolicyConfig
    let wall: NotificationWallClock
    var effects: [NotificationEffect] = []

    init(state: NotificationState, config: NotificationPolicyConfig) {
        self.state = state
        self.config = config
        wall = NotificationWallClock(config: config)
    }

    // MARK: Time

    /// Something due at an instant. Ties are processed in this order: a focus boundary first (a
    /// window is [start, end)), then triggers, coalesced updates, and the summary last (so that
    /// what fires at a summary time joins that summary).
    enum Due: Comparable {
        case focusBoundary
        case trigger(Int)
        case coalesced(Int)
        case summary
    }

    /// The earliest thing due after `from` (triggers and coalesced updates even if before it).
    func nextDue(after from: NotificationTime?) -> (time: NotificationTime, due: Due)? {
        var best: (time: NotificationTime, due: Due)?
        func consider(_ time: NotificationTime?, _ due: Due) {
            guard let time else { return }
            if best == nil || time < best!.time || (time == best!.time && due < best!.due) { best = (time, due) }
        }
        for (i, p) in state.pending.enumerated() { consider(p.fireAt, .trigger(i)) }
        for (i, h) in state.coalesced.enumerated() { consider(h.until, .coalesced(i)) }
        if let from {
            consider(nextFocusBoundary(after: from), .focusBoundary)
            // A summary time equal to `from` still counts, so nothing held at that instant waits a day.
            if !state.summaryQueue.isEmpty { consider(nextSummaryTime(after: from - 0.001), .summary) }
        }
        return best
    }

    /// Processes everything due up to `now`, in time order, then syncs the focus at `now`.
    mutating func advance(to now: NotificationTime) {
        guard var from = state.clock else {
            state.clock = now
            syncFocus(at: now)
            return
        }
        // Each step removes or moves what it processed past `from`; the bound only guards against bugs.
        for _ in 0..<100_000 {
            guard let (time, due) = nextDue(after: from), time <= now else { break }
            switch due {
            case .focusBoundary: syncFocus(at: time)
            case .trigger(let i): fire(i, at: time, now: now)
            case .coalesced(let i): releaseCoalesced(i, at: time)
            case .summary: deliverSummary(at: time)
            }
            from = max(from, time)
            state.clock = from
        }
        state.clock = now
        syncFocus(at: now)
    }

    /// The next summary time (N9) strictly after `t`.
    func nextSummaryTime(after t: NotificationTime) -> NotificationTime? {
        config.summaryTimes.compactMap { wall.nextOccurrence(of: $0, after: t) }.min()
    }

    /// The first fire time of a trigger added at `t`, or nil if it never fires.
    func firstFire(_ trigger: NotificationTrigger, at t: NotificationTime) -> NotificationTime? {
        switch trigger {
        case .interval(let seconds, _): t + seconds
        case .calendar(let match, _): wall.nextOccurrence(of: match, after: t)
        }
    }

    /// The next fire time of a repeating trigger that fired (or should have) at `previous`, not
    /// before `notBefore`. Interval triggers stay on their absolute grid (N8).
    func nextFire(_ trigger: NotificationTrigger, previous: NotificationTime, notBefore: NotificationTime) -> NotificationTime? {
        switch trigger {
        case .interval(let seconds, _):
            let steps = max(1, ((notBefore - previous) / seconds).rounded(.down) + 1)
            return previous + steps * seconds
        case .calendar(let match, _):
            return wall.nextOccurrence(of: match, after: max(previous, notBefore))
        }
    }

    /// A pending request's trigger came due at `time` (N8). A trigger more than
    /// `missedTriggerTolerance` behind `now` was missed (N15): a one-shot one is delivered once,
    /// marked late; a repeating one skips its missed occurrences to the first within the
    /// tolerance of `now`. That occurrence, if it is not after `now`, is on time and fires next,
    /// so every repeating trigger is treated alike however long the daemon was down. An on-time
    /// one is decided and delivered at its due `time`; a late one at `now`, when it reaches the
    /// user: its `deliveredAt` says when it was shown, not when it should have been, and focus
    /// schedules (N7) and burst limits (N11) apply as they are when it comes.
    mutating func fire(_ index: Int, at time: NotificationTime, now: NotificationTime) {
        let p = state.pending[index]
        let late = now - time > config.missedTriggerTolerance
        if let trigger = p.request.trigger, trigger.repeats {
            if let next = nextFire(trigger, previous: time, notBefore: late ? now - config.missedTriggerTolerance : time) {
                state.pending[index].fireAt = next
            } else {
                state.pending.remove(at: index)
            }
            if late { return }
        } else {
            state.pending.remove(at: index)
        }
        deliver(p.request, app: p.app, peerPath: p.peerExecutablePath, at: late ? now : time, origin: .trigger(late: late))
    }

    /// Releases a coalesced update at the end of its window (N11): the last one kept is delivered.
    mutating func releaseCoalesced(_ index: Int, at time: NotificationTime) {
        let h = state.coalesced.remove(at: index)
        state.history.updates[h.app, default: []].append(time)
        deliver(h.request, app: h.app, peerPath: h.peerExecutablePath, at: time, origin: .coalesced)
    }

    /// Delivers the scheduled summary (N9): held notifications by relevance (high first), then by
    /// the time they were held; at most one sound for the batch; one `summaryDelivered` event.
    mutating func deliverSummary(at time: NotificationTime) {
        let batch = state.summaryQueue.enumerated().sorted { a, b in
            let (ra, rb) = (a.element.request.content.relevanceScore, b.element.request.content.relevanceScore)
            if ra != rb { return ra > rb }
            if a.element.heldAt != b.element.heldAt { return a.element.heldAt < b.element.heldAt }
            return a.offset < b.offset
        }.map(\.element)
        state.summaryQueue = []
        var soundPlayed = false
        var views: [NotificationView] = []
        for h in batch {
            let (decision, entry) = deliver(h.request, app: h.app, peerPath: h.peerExecutablePath, at: time,
                                            origin: .summary(soundAllowed: !soundPlayed))
            if decision.sound != nil { soundPlayed = true }
            if let entry { views.append(view(of: entry)) }
        }
        effects.append(.emit(.summaryDelivered(views)))
    }

    // MARK: Bookkeeping

    /// Keeps a decision for explanation (N16), trimming the log to `decisionLogLimit`.
    mutating func log(_ app: String, _ identifier: String, _ decision: NotificationDecision, at time: NotificationTime) {
        state.decisionLog.append(NotificationDecisionRecord(app: app, identifier: identifier, time: time, decision: decision))
        let excess = state.decisionLog.count - max(0, config.decisionLogLimit)
        if excess > 0 { state.decisionLog.removeFirst(excess) }
    }

    /// A rejection decision, logged and told to watchers (N16), and by default the `.failed` reply.
    @discardableResult
    mutating func reject(_ code: NotificationErrorCode, app: String, identifier: String, level: InterruptionLevel,
                         rule: String?, _ message: String, at time: NotificationTime, reply: Bool = true) -> NotificationDecision {
        let decision = NotificationDecision(outcome: .rejected(code), requestedLevel: level, level: level,
                                            rules: rule.map { [$0] } ?? [], notes: [message])
        log(app, identifier, decision, at: time)
        effects.append(.emit(.decided(app: app, identifier: identifier, decision: decision)))
        if reply { effects.append(.reply(.failed(code: code, message: message, decision: decision))) }
        return decision
    }

    /// A reply that refuses a malformed or impossible event with no notification decision.
    mutating func fail(_ code: NotificationErrorCode, _ message: String) {
        effects.append(.reply(.failed(code: code, message: message, decision: nil)))
    }

    /// Sets an app's badge (N12) and tells the engine if it changed.
    mutating func setBadge(_ app: String, _ count: Int) {
        guard state.apps[app, default: .init()].badge != count else { return }
        state.apps[app, default: .init()].badge = count
        effects.append(.badgeChanged(app: app, count: count))
    }

    /// Removes an app's delivered notifications (all, or those identifiers) from the center and
    /// tells watchers why. Returns the identifiers removed.
    @discardableResult
    mutating func removeDelivered(app: String, where matches: (DeliveredNotification) -> Bool, reason: String) -> [String] {
        let key = CenterKey(app: app)
        let removed = state.delivered.filter { $0.isOf(key, app: app) && matches($0) }.map(\.request.identifier)
        guard !removed.isEmpty else { return [] }
        state.delivered.removeAll { $0.isOf(key, app: app) && matches($0) }
        effects.append(.emit(.removed(app: app, identifiers: removed, reason: reason)))
        return removed
    }

    /// Removes an app's requests that wait for a trigger and/or are held (summary, coalescing),
    /// all or those identifiers. Returns whether anything was removed.
    @discardableResult
    mutating func removeWaiting(app: String, identifiers: [String]?, pending: Bool, held: Bool) -> Bool {
        let before = state.pending.count + state.summaryQueue.count + state.coalesced.count
        func hit(_ a: String, _ id: String) -> Bool { a == app && (identifiers?.contains(id) ?? true) }
        if pending { state.pending.removeAll { hit($0.app, $0.request.identifier) } }
        if held {
            state.summaryQueue.removeAll { hit($0.app, $0.request.identifier) }
            state.coalesced.removeAll { hit($0.app, $0.request.identifier) }
        }
        return state.pending.count + state.summaryQueue.count + state.coalesced.count != before
    }

    /// A delivered notification as watchers see it (N13).
    func view(of n: DeliveredNotification) -> NotificationView {
        let record = state.apps[n.app]
        let content = n.request.content
        let hidden = record?.settings.showPreviews == .never
        let placeholder = content.categoryIdentifier.flatMap { record?.categories[$0]?.hiddenPreviewsBodyPlaceholder }
            ?? config.placeholderText
        return NotificationView(app: n.app, identifier: n.request.identifier, title: content.title,
                                subtitle: content.subtitle, body: hidden ? placeholder : content.body,
                                previewHidden: hidden, categoryIdentifier: content.categoryIdentifier,
                                threadIdentifier: content.threadIdentifier, level: n.decision.level,
                                relevanceScore: content.relevanceScore, deliveredAt: n.deliveredAt, late: n.late)
    }
}
