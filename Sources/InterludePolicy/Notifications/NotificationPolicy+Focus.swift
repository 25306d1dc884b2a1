/// Focus (N7) and its schedules (N8).
extension NotificationReducer {
    /// A schedule window of a focus mode that covers an instant.
    struct CoveringWindow {
        var name: String
        var start: NotificationTime
        var end: NotificationTime
    }

    /// Every focus mode's schedule windows covering `t`, with their start and end.
    func coveringWindows(at t: NotificationTime) -> [CoveringWindow] {
        var out: [CoveringWindow] = []
        for name in config.focusModes.keys.sorted() {
            for window in config.focusModes[name]!.schedule {
                guard let start = wall.coveringStart(of: window, at: t),
                      let end = wall.nextBoundary(of: window, after: t) else { continue }
                out.append(CoveringWindow(name: name, start: start, end: end))
            }
        }
        return out
    }

    /// The focus that should be in effect at `t`: the user's override while it lasts (expired
    /// overrides are dropped), else the scheduled mode whose window started last (ties: by name).
    mutating func effectiveFocus(at t: NotificationTime) -> (name: String, manual: Bool)? {
        switch state.focus.override {
        case .on(let name, let until)?:
            if until.map({ t < $0 }) ?? true, config.focusModes[name] != nil { return (name, true) }
            state.focus.override = nil
        case .off(let until)?:
            if t < until { return nil }
            state.focus.override = nil
        case nil:
            break
        }
        var best: CoveringWindow?
        for w in coveringWindows(at: t) where best == nil || w.start > best!.start { best = w }
        return best.map { ($0.name, false) }
    }

    /// The next instant after `t` at which the focus may change: an override's end or any
    /// schedule window's start or end.
    func nextFocusBoundary(after t: NotificationTime) -> NotificationTime? {
        var best: NotificationTime?
        func consider(_ b: NotificationTime?) {
            if let b, b > t, best == nil || b < best! { best = b }
        }
        switch state.focus.override {
        case .on(_, let until)?: consider(until)
        case .off(let until)?: consider(until)
        case nil: break
        }
        for mode in config.focusModes.values {
            for window in mode.schedule { consider(wall.nextBoundary(of: window, after: t)) }
        }
        return best
    }

    /// Brings `state.focus.active` up to date at `t`. When a focus ends (or gives way to another),
    /// watchers get `focusChanged` and exactly one `missedDuringFocus` with what it silenced (N7).
    mutating func syncFocus(at t: NotificationTime) {
        let target = effectiveFocus(at: t)
        let current = state.focus.active
        if let target, target.name == current?.name {
            state.focus.active?.manual = target.manual
            return
        }
        if target == nil, current == nil { return }
        state.focus.active = target.map { NotificationFocusState.Active(name: $0.name, since: t, manual: $0.manual) }
        effects.append(.emit(.focusChanged(focus: target?.name, previous: current?.name, manual: target?.manual ?? false)))
        if let current {
            effects.append(.emit(.missedDuringFocus(focus: current.name, missed: state.focus.missed)))
            state.focus.missed = []
        }
    }

    /// The user turns a focus on (optionally until an instant) or off (N7). Turning it off while a
    /// schedule window covers now keeps schedules off until those windows end.
    mutating func setFocus(name: String?, until: NotificationTime?, at now: NotificationTime) {
        if let name {
            guard config.focusModes[name] != nil else {
                return fail(.badRequest, "unknown focus \"\(name)\" (configured: \(config.focusModes.keys.sorted().joined(separator: ", ")))")
            }
            if let until, until <= now { return fail(.badRequest, "focus end time is not in the future") }
            state.focus.override = .on(name: name, until: until)
        } else {
            let ends = coveringWindows(at: now).map(\.end)
            state.focus.override = ends.max().map { .off(until: $0) }
        }
        syncFocus(at: now)
        effects.append(.reply(.done))
    }

    /// Whether a notification or sound at `level` from `app` (with `sender`) breaks through the
    /// focus in effect (N7, N4 for time-sensitive, N3 for critical): nil if no focus is in effect,
    /// else whether it is silenced and the rules and notes that say why.
    func focusVerdict(app: String, sender: String?, level: InterruptionLevel, repeatedCall: Bool)
        -> (silenced: Bool, rules: [String], notes: [String])? {
        guard let focus = state.focus.active, let mode = config.focusModes[focus.name] else { return nil }
        let name = focus.name
        if level == .critical { return (false, [], ["critical: plays through focus \(name)"]) }
        if mode.allowedApps.contains(app) { return (false, ["N7"], ["app allowed by focus \(name)"]) }
        if let sender, mode.allowedSenders.contains(sender) {
            return (false, ["N7"], ["sender \(sender) allowed by focus \(name)"])
        }
        if level == .timeSensitive, mode.allowTimeSensitive {
            return (false, ["N4"], ["time-sensitive: breaks through focus \(name)"])
        }
        if repeatedCall, mode.allowRepeatedCalls {
            return (false, ["N7"], ["second call from the same sender within \(Int(config.repeatedCallWindow)) s: breaks through focus \(name)"])
        }
        return (true, ["N7"], ["silenced by focus \(name)"])
    }
}
