/// Delivery of one notification: level (N3, N4), summary (N9), focus (N7), passive (N5),
/// provisional (N1), replacement (N10), badge (N12), sound (N3, N11, ringer, call), center limit (N11).
extension NotificationReducer {
    /// Where a delivery comes from.
    enum Origin: Equatable {
        /// An app's request with no trigger.
        case request
        /// A trigger fired; `late` if it was missed while the daemon was down (N15).
        case trigger(late: Bool)
        /// Released with the scheduled summary; only the first sound of a batch may play (N9).
        case summary(soundAllowed: Bool)
        /// Released at the end of a coalescing window (N11).
        case coalesced

        /// Whether this is a summary release.
        var isSummary: Bool {
            if case .summary = self { true } else { false }
        }
    }

    /// The level a request is treated as (N3, N4), with the rule and note if it changed or was honoured.
    /// - Parameter fallback: what a critical request becomes without the entitlement (N3):
    ///   `active`, or `timeSensitive` for a request that asks for it (a bus notification's
    ///   critical urgency), itself subject to the app's time-sensitive setting (N4).
    /// `peerProblem` says why the peer's executable is not known (the engine could not trust it).
    func effectiveLevel(_ requested: InterruptionLevel, app: String, record: NotificationAppRecord,
                        peerPath: String?, fallback: InterruptionLevel = .active,
                        peerProblem: String? = nil) -> (level: InterruptionLevel, rules: [String], notes: [String]) {
        switch requested {
        case .critical:
            let entitled = config.entitledCriticalApps.contains {
                $0.app == app && ($0.executablePath == nil || $0.executablePath == peerPath)
            }
            if entitled, record.settings.criticalAlerts { return (.critical, ["N3"], ["entitled critical alert"]) }
            let why = entitled ? "critical alerts are off in the app's settings"
                : peerProblem.map { "the peer is not entitled to critical alerts: \($0)" }
                ?? "the app (or its executable) is not entitled to critical alerts"
            let to: InterruptionLevel = fallback == .timeSensitive && record.settings.timeSensitive ? .timeSensitive : .active
            return (to, ["N3"], [why + ": downgraded to \(to)"])
        case .timeSensitive:
            if record.settings.timeSensitive { return (.timeSensitive, [], []) }
            return (.active, ["N4"], ["time-sensitive is off in the app's settings: treated as active"])
        case .passive, .active:
            return (requested, [], [])
        }
    }

    /// Whether a notification or sound goes quiet (no sound, no banner) before the sound gate:
    /// provisional authorization (N1), passive (N5), or the focus in effect (N7, with N4 and N3
    /// breaking through). `byFocus` says the focus silenced it (it is then "missed during focus").
    func quietVerdict(record: NotificationAppRecord, app: String, sender: String?, level: InterruptionLevel,
                      repeatedCall: Bool) -> (silenced: Bool, byFocus: Bool, rules: [String], notes: [String]) {
        if record.settings.authorization == .provisional {
            return (true, false, ["N1"], ["provisional authorization: delivered quietly"])
        }
        if level == .passive { return (true, false, ["N5"], ["passive: notification center only"]) }
        if let verdict = focusVerdict(app: app, sender: sender, level: level, repeatedCall: repeatedCall) {
            return (verdict.silenced, verdict.silenced, verdict.rules, verdict.notes)
        }
        return (false, false, [], [])
    }

    /// What sound, if any, plays for `app` at `level` (N3, N2/N1 sound permission, A4 call,
    /// A12/N4 ringer-silent, N11 rate and cooldown), updating the N11 history. A critical level
    /// here is an honoured one. `rateLimited` says the per-app audible interval stopped it.
    mutating func soundGate(app: String, record: NotificationAppRecord, name: String, volume: Double,
                            level: InterruptionLevel, thread: String?, at t: NotificationTime)
        -> (sound: NotificationSoundDecision?, rules: [String], notes: [String], rateLimited: Bool) {
        if level == .critical {
            return (NotificationSoundDecision(name: name, volume: volume, bypassRingerAndFocus: true, unmuteOutput: true),
                    [], ["critical sound at volume \(volume) through ringer-silent, focus, a call and a muted output"], false)
        }
        guard record.settings.sound else { return (nil, ["N2"], ["sounds are off in the app's settings"], false) }
        guard record.granted(.sound) else { return (nil, ["N1"], ["the app did not ask for sound authorization"], false) }
        // N16 cites the rules that changed the outcome: the call (A4) or the ringer (A12) silences
        // it, whatever its level; that time-sensitive does not bypass them (N4) is said in a note.
        let ts = level == .timeSensitive ? " (time-sensitive does not bypass it, N4)" : ""
        if state.callActive { return (nil, ["A4"], ["a call is in progress: no sound" + ts], false) }
        if state.ringerSilent { return (nil, ["A12"], ["the ringer is silent: no sound" + ts], false) }
        let bursts = config.bursts
        let thread = thread ?? ""
        let previous = state.history.lastAlert[app]?[thread]
        state.history.lastAlert[app, default: [:]][thread] = t
        if let last = state.history.lastAudible[app], t - last < bursts.audibleAlertInterval {
            return (nil, ["N11"], ["at most one audible alert per app per \(bursts.audibleAlertInterval) s"], true)
        }
        let factor = bursts.cooldownVolume(elapsed: previous.map { t - $0 })
        let since = previous.map { "\(((t - $0) * 10).rounded() / 10) s after the previous alert of this app and thread" } ?? ""
        if factor <= 0 { return (nil, ["N11"], ["cooldown: " + since + ": no sound"], false) }
        state.history.lastAudible[app] = t
        let sound = NotificationSoundDecision(name: name, volume: volume * factor)
        return factor < 1 ? (sound, ["N11"], ["cooldown: " + since + ": volume \(factor)"], false) : (sound, [], [], false)
    }

    /// N11 counts what the user heard: a decided sound that could not play is no audible alert
    /// (the per-app interval no longer counts from it: at its time the earlier audible alert was
    /// at least an interval before, so clearing is the same as going back to it) and starts no
    /// cooldown of its thread (the thread's next alert plays at full volume; an alert before it,
    /// heard or not, is forgotten too). Only when they are still this playback's.
    mutating func n11SoundNotHeard(_ playback: NotificationSoundPlayback) {
        guard let decidedAt = playback.decidedAt else { return }
        if state.history.lastAudible[playback.app] == decidedAt { state.history.lastAudible[playback.app] = nil }
        let thread = playback.thread ?? ""
        if state.history.lastAlert[playback.app]?[thread] == decidedAt { state.history.lastAlert[playback.app]?[thread] = nil }
    }

    /// Delivers (or holds for the summary, or refuses) one notification at `t` and returns the
    /// decision and the center entry it made, if any. Emits `deliver`, watcher events, badge and
    /// sound effects, and logs the decision (N16).
    @discardableResult
    mutating func deliver(_ request: NotificationRequest, app: String, peerPath: String?, peerProblem: String? = nil,
                          at t: NotificationTime, origin: Origin) -> (NotificationDecision, DeliveredNotification?) {
        let content = request.content
        let id = request.identifier
        let record = state.apps[app] ?? NotificationAppRecord()
        var rules: [String] = []
        var notes: [String] = []
        if origin.isSummary {
            rules.append("N9")
            notes.append("delivered with the scheduled summary")
        }

        // N1 again at delivery: the user may have changed their answer since the request was added.
        guard record.isAuthorized else {
            let d = reject(.notAuthorized, app: app, identifier: id, level: content.interruptionLevel, rule: "N1",
                           "the app is no longer authorized: dropped", at: t, reply: false)
            return (d, nil)
        }

        // N3, N4: the level it is treated as.
        let (level, levelRules, levelNotes) = effectiveLevel(content.interruptionLevel, app: app, record: record, peerPath: peerPath,
                                                             fallback: content.criticalFallbackLevel ?? .active,
                                                             peerProblem: peerProblem)
        rules += levelRules
        notes += levelNotes

        let repeatedCall = n7RememberCall(content, origin: origin, at: t)

        // N9: passive and active notifications of apps in the summary wait for the next summary time.
        if record.settings.scheduledSummary, !origin.isSummary, level <= .active {
            let d = n9HoldForSummary(request, app: app, peerPath: peerPath, level: level, rules: rules, notes: notes, at: t)
            return (d, nil)
        }
        if record.settings.scheduledSummary, level == .timeSensitive {
            rules.append("N4")
            notes.append("time-sensitive: breaks through the scheduled summary")
        }

        // N1 provisional, N5 passive, N7 focus: into the center without sound or banner.
        let quiet = quietVerdict(record: record, app: app, sender: content.sender, level: level, repeatedCall: repeatedCall)
        let silenced = quiet.silenced
        let missed = quiet.byFocus
        rules += quiet.rules
        notes += quiet.notes

        // N10: the same identifier replaces the delivered one; it alerts again unless alertOnce.
        let existing = state.deliveredIndex(of: id, app: app)
        // A badge-only request (a badge, and no title, subtitle or body) is an N12 update, not an
        // alert: no sound gate, and no N11 limit cited for a sound it was never meant to make.
        let badgeOnly = content.isEmpty && content.badge != nil
        var alerts = !silenced && !badgeOnly
        if existing != nil {
            rules.append("N10")
            notes.append("replaces the delivered notification with this identifier")
            if content.alertOnce, alerts {
                alerts = false
                notes.append("alertOnce: no new sound or banner")
            }
        }
        let banner = alerts && record.granted(.alert)

        // Sound: the summary's one sound (N9), then the gate.
        var sound: NotificationSoundDecision?
        if alerts, let name = content.sound {
            if case .summary(soundAllowed: false) = origin {
                notes.append("the summary already played its one sound")
            } else {
                let volume = level == .critical ? (content.criticalVolume ?? config.defaultCriticalVolume) : 1
                let gate = soundGate(app: app, record: record, name: name, volume: volume, level: level,
                                     thread: content.threadIdentifier, at: t)
                sound = gate.sound
                rules += gate.rules
                notes += gate.notes
            }
        }

        let badge = n12Badge(content, app: app, identifier: id, record: record, replaces: existing != nil, rules: &rules, notes: &notes)

        let outcome: NotificationDecision.Outcome = silenced ? .silenced
            : level < content.interruptionLevel ? .downgraded(from: content.interruptionLevel, to: level) : .delivered
        let decision = NotificationDecision(outcome: outcome, requestedLevel: content.interruptionLevel, level: level,
                                            banner: banner, sound: sound, badge: badge,
                                            rules: rules.isEmpty ? ["N1"] : rules, notes: notes)
        log(app, id, decision, at: t)

        var entry: DeliveredNotification?
        if content.isEmpty {
            effects.append(.emit(.decided(app: app, identifier: id, decision: decision)))
        } else {
            entry = n10PutInCenter(request, app: app, decision: decision, late: origin == .trigger(late: true),
                                   replacing: existing, missedDuringFocus: missed, at: t)
        }
        if let sound {
            effects.append(.playSound(NotificationSoundPlayback(
                app: app, notificationIdentifier: id, name: sound.name, volume: sound.volume,
                bypassRingerAndFocus: sound.bypassRingerAndFocus, unmuteOutput: sound.unmuteOutput, duckOthers: true,
                decidedAt: t, thread: content.threadIdentifier)))
        }
        return (decision, entry)
    }

    /// N7: remembers a call from its sender; returns whether it repeats one within
    /// `repeatedCallWindow` (a repeated call may break through focus). Summary releases do not count.
    mutating func n7RememberCall(_ content: NotificationContent, origin: Origin, at t: NotificationTime) -> Bool {
        guard content.isCall, let sender = content.sender, !origin.isSummary else { return false }
        defer { state.history.calls[sender] = t }
        if let last = state.history.calls[sender], t - last <= config.repeatedCallWindow { return true }
        return false
    }

    /// N9: holds a passive or active notification of an app in the scheduled summary until the
    /// next summary time (one held entry per app and identifier, the latest), and logs the decision.
    mutating func n9HoldForSummary(_ request: NotificationRequest, app: String, peerPath: String?, level: InterruptionLevel,
                                   rules: [String], notes: [String], at t: NotificationTime) -> NotificationDecision {
        let id = request.identifier
        state.summaryQueue.removeAll { $0.app == app && $0.request.identifier == id }
        state.summaryQueue.append(HeldNotification(app: app, request: request, peerExecutablePath: peerPath, heldAt: t, until: nil))
        n9DropOldestHeldOverLimits()
        let d = NotificationDecision(outcome: .held(until: nextSummaryTime(after: t - 0.001)),
                                     requestedLevel: request.content.interruptionLevel, level: level,
                                     rules: rules + ["N9"], notes: notes + ["held for the scheduled summary"])
        log(app, id, d, at: t)
        effects.append(.emit(.decided(app: app, identifier: id, decision: d)))
        return d
    }

    /// N9, N11: the summary holds no more than the center would keep of it: at most
    /// `maxDeliveredPerApp` of an app and `maxDeliveredTotal` over all apps, the oldest held going
    /// first (each app told which, reason `N11`), so an app in the summary cannot grow the state
    /// without bound until the next summary time. Only the app that just added can be over its
    /// limit (a lowered limit is applied at once, ``n11ApplyLimitsNow()``), so this is the same
    /// walk as after a change of the limits.
    mutating func n9DropOldestHeldOverLimits() {
        emitRemovedByApp(Self.n11Trim(&state.summaryQueue, perApp: config.bursts.maxDeliveredPerApp,
                                      total: max(1, config.bursts.maxDeliveredTotal),
                                      app: \.app, identifier: \.request.identifier), reason: "N11")
    }

    /// Tells each app which of its notifications left (`notificationRemoved`), one event per app
    /// in the order the apps first appear in `removed` (app, identifier), with `reason`.
    mutating func emitRemovedByApp(_ removed: [(app: String, identifier: String)], reason: String) {
        var byApp: [String: [String]] = [:]
        var order: [String] = []
        for (app, identifier) in removed {
            if byApp[app] == nil { order.append(app) }
            byApp[app, default: []].append(identifier)
        }
        for app in order { effects.append(.emit(.removed(app: app, identifiers: byApp[app]!, reason: reason))) }
    }

    /// N12: a content badge sets the app's badge (0 also clears its other delivered
    /// notifications); a new notification without one counts one up. Returns the badge set, if
    /// any; the rules and notes say why one was not.
    mutating func n12Badge(_ content: NotificationContent, app: String, identifier id: String, record: NotificationAppRecord,
                           replaces: Bool, rules: inout [String], notes: inout [String]) -> Int? {
        if let count = content.badge {
            if count == 0 {
                let cleared = removeDelivered(app: app, where: { $0.request.identifier != id }, reason: "N12")
                if !cleared.isEmpty {
                    rules.append("N12")
                    notes.append("badge 0 cleared \(cleared.count) delivered notification(s)")
                }
            }
            guard record.badgesOn else {
                rules.append("N12")
                notes.append("badges are off for this app")
                return nil
            }
            setBadge(app, count)
            return count
        }
        guard !replaces, !content.isEmpty, record.badgesOn else { return nil }
        let next = min(record.badge + 1, NotificationPolicy.maximumBadge)
        setBadge(app, next)
        return next
    }

    /// Puts a delivered notification in the center, newest last, and tells watchers: N10, a
    /// replacement (`replacing`: the index of the entry with its identifier) is one entry moved to
    /// the newest place that keeps the decisions of the ones it replaced (N16, the newest
    /// `decisionHistoryPerNotification`); N7, one silenced by the focus is listed as missed; N11,
    /// the app's and the center's limits drop the oldest.
    mutating func n10PutInCenter(_ request: NotificationRequest, app: String, decision: NotificationDecision, late: Bool,
                                 replacing existing: Int?, missedDuringFocus: Bool, at t: NotificationTime) -> DeliveredNotification {
        let id = request.identifier
        var e = DeliveredNotification(app: app, request: request, deliveredAt: t, late: late, decision: decision)
        // Found again, not taken at `existing`: N12's badge 0 may have cleared entries before it since.
        if existing != nil, let i = state.deliveredIndex(of: id, app: app) {
            let old = state.delivered.remove(at: i)
            e.earlierDecisions = Array(((old.earlierDecisions ?? []) + [NotificationDecisionRecord(
                app: app, identifier: id, time: old.deliveredAt, decision: old.decision)])
                .suffix(max(0, config.decisionHistoryPerNotification)))
        }
        state.delivered.append(e)
        effects.append(.deliver(e))
        effects.append(.emit(existing != nil ? .updated(view(of: e), decision) : .delivered(view(of: e), decision)))
        if missedDuringFocus {
            state.focus.missed.removeAll { $0.app == app && $0.identifier == id }
            state.focus.missed.append(NotificationMissedEntry(app: app, identifier: id, title: request.content.title, time: t))
        }
        dropOldestOverPerApp(app)
        dropOldestOverTotal()
        return e
    }

    /// N11: an app keeps at most `maxDeliveredPerApp` notifications in the center; its oldest go
    /// first, and it is told which (reason `N11`). One walk of the center: an app at its limit
    /// drops one per new notification, so this runs on almost every `add` of a busy app (issue 9).
    mutating func dropOldestOverPerApp(_ app: String) {
        let key = CenterKey(app: app)
        var count = 0
        for n in state.delivered where n.isOf(key, app: app) { count += 1 }
        let excess = count - config.bursts.maxDeliveredPerApp
        guard excess > 0 else { return }
        var dropped: [Int] = []
        for (i, n) in state.delivered.enumerated() where n.isOf(key, app: app) {
            dropped.append(i)
            if dropped.count == excess { break }
        }
        let identifiers = dropped.map { state.delivered[$0].request.identifier }
        for i in dropped.reversed() { state.delivered.remove(at: i) }
        effects.append(.emit(.removed(app: app, identifiers: identifiers, reason: "N11")))
    }

    /// N11 after a change of the limits (``NotificationEvent/limitsChanged``): every app's oldest
    /// over `maxDeliveredPerApp`, then the center's oldest over `maxDeliveredTotal`, then the
    /// scheduled summary's the same way (N9), as adds would have dropped them. One walk of each
    /// list, whatever the number of apps over their limit (it runs at every start).
    mutating func n11ApplyLimitsNow() {
        let perApp = config.bursts.maxDeliveredPerApp, total = max(1, config.bursts.maxDeliveredTotal)
        emitRemovedByApp(Self.n11Trim(&state.delivered, perApp: perApp, total: total, app: \.app, identifier: \.request.identifier),
                         reason: "N11")
        emitRemovedByApp(Self.n11Trim(&state.summaryQueue, perApp: perApp, total: total, app: \.app, identifier: \.request.identifier),
                         reason: "N11")
    }

    /// N11's limits on a list, oldest first, in one walk: each app's entries over `perApp`, then
    /// the oldest left over `total`. Returns what went (app, identifier), in list order.
    static func n11Trim<T>(_ list: inout [T], perApp: Int, total: Int, app: (T) -> String,
                           identifier: (T) -> String) -> [(app: String, identifier: String)] {
        var excess: [String: Int] = [:]
        for x in list { excess[app(x), default: -perApp] += 1 }
        let perAppDrops = excess.values.reduce(0) { $0 + max(0, $1) }
        var overTotal = list.count - perAppDrops - total
        guard perAppDrops > 0 || overTotal > 0 else { return [] }
        var kept: [T] = [], dropped: [(app: String, identifier: String)] = []
        kept.reserveCapacity(list.count)
        for x in list {
            let a = app(x)
            if let left = excess[a], left > 0 {
                excess[a] = left - 1
                dropped.append((a, identifier(x)))
            } else if overTotal > 0 {
                overTotal -= 1
                dropped.append((a, identifier(x)))
            } else {
                kept.append(x)
            }
        }
        list = kept
        return dropped
    }

    /// N11, N15: the whole center keeps at most `maxDeliveredTotal` notifications over all apps;
    /// the oldest go first, each app told which of its notifications left (reason `N11`).
    mutating func dropOldestOverTotal() {
        let excess = state.delivered.count - max(1, config.bursts.maxDeliveredTotal)
        guard excess > 0 else { return }
        let dropped = state.delivered.prefix(excess).map { ($0.app, $0.request.identifier) }
        state.delivered.removeFirst(excess)
        emitRemovedByApp(dropped, reason: "N11")
    }
}
