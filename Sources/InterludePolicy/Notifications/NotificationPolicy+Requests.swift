/// Handling of each event: authorization (N1), settings (N2), adding requests (N6, N8, N10, N11),
/// removal, badges (N12), categories and actions (N14), ringer, calls, standalone sounds (N17).
extension NotificationReducer {
    /// Handles one event at `now`, after `advance(to: now)`.
    mutating func handle(_ event: NotificationEvent, at now: NotificationTime) {
        // An event that may make a record for an app not known yet needs room for it (`maxApps`);
        // the record it makes was seen now.
        if let app = event.appItRecords, state.apps[app] == nil {
            // A connecting app gets its record in any case: it may not be forgotten while it is
            // connected, and connections are bounded (`server.maxClients`), so connected apps can
            // take the records past `maxApps` only by as many.
            let connecting = if case .appConnected = event { true } else { false }
            guard makeRoomForNewApp(app) || connecting else {
                return fail(.limitReached, "the daemon keeps records of \(config.maxApps) apps (maxApps) and not enough of them may be "
                            + "forgotten: the others hold a choice of the user's, something waiting, or a connection")
            }
            defer { if state.apps[app] != nil, state.apps[app]!.lastSeen == nil { state.apps[app]!.lastSeen = now } }
            handleEvent(event, at: now)
            return
        }
        handleEvent(event, at: now)
    }

    /// ``handle(_:at:)`` once there is room for the app's record.
    private mutating func handleEvent(_ event: NotificationEvent, at now: NotificationTime) {
        switch event {
        case .requestAuthorization(let app, let options): requestAuthorization(app: app, options: options, at: now)
        case .setSettings(let app, let change):
            let settings = change.applied(to: state.apps[app, default: .init()].settings)
            state.apps[app, default: .init()].settings = settings
            // N1: an authorization the user sets is the user's answer, not the default's.
            if change.authorization != nil { state.apps[app]!.answeredByDefault = nil }
            effects.append(.emit(.settingsChanged(app: app, settings)))
            effects.append(.reply(.done))
        case .add(let request, let app, let path, let problem): add(request, app: app, peerPath: path, peerProblem: problem, at: now)
        case .removePending(let app, let ids):
            removeWaiting(app: app, identifiers: ids, pending: true, held: true)
            effects.append(.reply(.done))
        case .removeDelivered(let app, let ids):
            removeWaiting(app: app, identifiers: ids, pending: false, held: true)
            removeDelivered(app: app, where: { ids?.contains($0.request.identifier) ?? true }, reason: "request")
            // N12 both ways: a content badge of 0 empties the center, and emptying the center
            // (all, not some) sets the badge to 0, so an empty center never shows an old count.
            if ids == nil, state.apps[app]?.badgesOn == true { setBadge(app, 0) }
            effects.append(.reply(.done))
        case .setBadge(let app, let count): setBadgeRequest(app: app, count: count)
        case .registerCategories(let app, let categories): registerCategories(app: app, categories)
        case .respondToAction(let app, let id, let action, let text):
            respond(app: app, notification: id, action: action, text: text, at: now)
        case .setFocus(let name, let until): setFocus(name: name, until: until, at: now)
        case .setRinger(let silent):
            state.ringerSilent = silent
            effects.append(.reply(.done))
        case .setCallActive(let active): state.callActive = active
        case .play(let request, let app, let path, let problem): play(request, app: app, peerPath: path, peerProblem: problem, at: now)
        case .soundNotPlayed(let playback): n11SoundNotHeard(playback)
        case .appConnected(let app):
            state.apps[app, default: .init()].connected = true
            state.apps[app]!.viaBus = nil  // it speaks over the socket: no longer only a D-Bus app's record
            for response in state.apps[app]!.queuedResponses { effects.append(.sendToApp(app: app, response)) }
            state.apps[app]!.queuedResponses = []
        case .appDisconnected(let app):
            state.apps[app]?.connected = false
        case .tick:
            break
        case .limitsChanged:
            n11ApplyLimitsNow()
        case .registerRemote(let app, let enabled):
            state.apps[app, default: .init()].remoteRegistered = enabled
            effects.append(.reply(.done))
        case .busAppSeen(let app, let answer):
            let known = state.apps[app]
            var record = known ?? NotificationAppRecord()
            if known == nil { record.viaBus = true }  // an app first known from the bus
            if record.settings.authorization == .notDetermined, let answer {
                record.settings.authorization = answer
                record.answeredByDefault = true
                effects.append(.emit(.settingsChanged(app: app, record.settings)))
            }
            state.apps[app] = record
            effects.append(.reply(.done))
        case .addRemote(let request, let app, let messageID, let window):
            addRemote(request, app: app, messageID: messageID, dedupeWindow: window, at: now)
        case .remoteReceiptsOwed(let receipts):
            oweReceipts(receipts)
        case .remoteReceiptsAcknowledged(let receipts):
            receiptsAcknowledged(receipts)
        }
    }

    /// N1: the answer comes from the app's settings; if there is none yet, from the config's
    /// default policy (`grant`, `deny`, or `prompt`, which tells watchers and leaves it undetermined).
    /// A `provisional` request is granted provisionally unless the policy denies. Asking again keeps
    /// an answer the user gave, except that a provisional app asking for full authorization is
    /// answered again.
    mutating func requestAuthorization(app: String, options: [NotificationAuthorizationOption], at now: NotificationTime) {
        var record = state.apps[app] ?? NotificationAppRecord()
        var asked = record.requestedOptions ?? []
        for o in options where !asked.contains(o) { asked.append(o) }
        record.requestedOptions = asked
        record.lastSeen = now
        let wantsProvisional = options.contains(.provisional)
        let status = record.settings.authorization
        if status == .notDetermined || (status == .provisional && !wantsProvisional) {
            let before = record.settings.authorization
            switch config.authorization.default {
            case .grant: record.settings.authorization = wantsProvisional ? .provisional : .authorized
            case .deny: record.settings.authorization = .denied
            case .prompt:
                if wantsProvisional, status == .notDetermined {
                    record.settings.authorization = .provisional
                } else {
                    effects.append(.emit(.authorizationRequested(app: app, options: options)))
                }
            }
            if record.settings.authorization != before { record.answeredByDefault = true }
        }
        state.apps[app] = record
        let granted = record.isAuthorized ? asked : []
        effects.append(.reply(.authorization(status: record.settings.authorization, options: granted)))
    }

    /// What makes a request malformed whatever the state and the app: an empty identifier, one
    /// longer than ``NotificationPolicy/maximumIdentifierBytes`` or holding a control character, a
    /// number out of its range (relevance 0…1, N9; criticalVolume 0…1, N3; badge 0…
    /// ``NotificationPolicy/maximumBadge``, N12), a trigger that never fires, fires more than
    /// 10 years after `now`, or repeats faster than `minimumRepeatingInterval` (N8). On success,
    /// the trigger's first fire time (nil without a trigger). `add` refuses such a request with
    /// `badRequest`; a remote message with one is malformed (REMOTE.md), checked by
    /// ``NotificationPolicy/requestProblem(_:at:config:)`` before its id is taken.
    func requestProblem(_ request: NotificationRequest, at now: NotificationTime) -> Result<NotificationTime?, RequestProblem> {
        let c = request.content
        func problem(_ rule: String?, _ message: String) -> Result<NotificationTime?, RequestProblem> {
            .failure(RequestProblem(rule: rule, message: message))
        }
        guard !request.identifier.isEmpty else { return problem(nil, "param \"identifier\" must not be empty") }
        guard request.identifier.utf8.count <= NotificationPolicy.maximumIdentifierBytes else {
            return problem(nil, "param \"identifier\" has \(request.identifier.utf8.count) bytes; at most \(NotificationPolicy.maximumIdentifierBytes)")
        }
        if let control = request.identifier.unicodeScalars.first(where: NotificationPolicy.breaksALine) {
            return problem(nil, "param \"identifier\" holds \(NotificationPolicy.codePoint(control)) (a control character or line separator); an identifier is one line of text")
        }
        guard (0...1).contains(c.relevanceScore) else { return problem("N9", "relevance must be 0…1") }
        if let v = c.criticalVolume, !(0...1).contains(v) { return problem("N3", "criticalVolume must be 0…1") }
        if let b = c.badge, !(0...NotificationPolicy.maximumBadge).contains(b) { return problem("N12", "badge \(b) is not 0…\(NotificationPolicy.maximumBadge)") }
        guard let trigger = request.trigger else { return .success(nil) }
        if case .interval(let seconds, let repeats) = trigger {
            guard seconds.isFinite, seconds > 0 else { return problem("N8", "trigger.in must be > 0 s, not \(plainNumber(seconds))") }
            if repeats, seconds < config.minimumRepeatingInterval {
                return problem("N8", "a repeating trigger.in must be ≥ \(plainNumber(config.minimumRepeatingInterval)) s, not \(plainNumber(seconds))")
            }
        }
        if case .calendar(let match, _) = trigger, let why = match.problem {
            return problem("N8", "trigger.calendar: \(why)")
        }
        guard let first = firstFire(trigger, at: now) else {
            return problem("N8", "no date in the next 10 years matches the calendar trigger (a date already past, or one that does not exist, as February 30)")
        }
        guard first - now <= NotificationPolicy.maximumScheduleSeconds else {
            return problem("N8", "the trigger fires more than 10 years from now")
        }
        return .success(first)
    }

    /// Adds a request: validation before any change (badRequest, N1, N6), then N10 replacement of
    /// a waiting one, then pending with its trigger (N8), coalesced (N11) or delivered now.
    mutating func add(_ request: NotificationRequest, app: String, peerPath: String?, peerProblem: String? = nil, at now: NotificationTime) {
        let c = request.content
        let id = request.identifier
        func refuse(_ code: NotificationErrorCode, _ rule: String?, _ message: String) {
            reject(code, app: app, identifier: id, level: c.interruptionLevel, rule: rule, message, at: now)
        }
        let fireAt: NotificationTime?
        switch requestProblem(request, at: now) {
        case .success(let first): fireAt = first
        case .failure(let problem): return refuse(.badRequest, problem.rule, problem.message)
        }
        let record = state.apps[app] ?? NotificationAppRecord()
        if let why = record.notAuthorizedReason { return refuse(.notAuthorized, "N1", why) }
        if c.promotional {
            guard c.interruptionLevel < .timeSensitive else {
                return refuse(.promotionalNotAllowed, "N6", "promotional notifications may not be timeSensitive or critical")
            }
            guard record.settings.marketing else {
                return refuse(.promotionalNotAllowed, "N6", "the user has not opted in to promotional notifications from this app")
            }
        }

        if fireAt != nil, let why = n8PendingLimit(app: app, identifier: id) {
            return refuse(.limitReached, "N8", why)
        }

        let replaced = removeWaiting(app: app, identifiers: [id], pending: true, held: true)
        if let fireAt {
            state.pending.append(PendingNotification(app: app, request: request, peerExecutablePath: peerPath,
                                                     addedAt: now, fireAt: fireAt))
            let d = NotificationDecision(outcome: .held(until: fireAt), requestedLevel: c.interruptionLevel,
                                         level: c.interruptionLevel, rules: replaced ? ["N8", "N10"] : ["N8"],
                                         notes: ["waits for its trigger"])
            log(app, id, d, at: now)
            effects.append(.emit(.decided(app: app, identifier: id, decision: d)))
            effects.append(.reply(.accepted(identifier: id, decision: d)))
            return
        }

        // N11: updates of a delivered notification above the per-second limit are coalesced; the
        // last one is released when the window allows.
        if state.deliveredIndex(of: id, app: app) != nil {
            var recent = (state.history.updates[app] ?? []).filter { $0 > now - 1 && $0 <= now }
            if recent.count >= config.bursts.coalesceAbovePerSecond {
                let until = max(now, recent.min()! + 1)
                state.coalesced.append(HeldNotification(app: app, request: request, peerExecutablePath: peerPath,
                                                        heldAt: now, until: until))
                state.history.updates[app] = recent
                let d = NotificationDecision(
                    outcome: .held(until: until), requestedLevel: c.interruptionLevel, level: c.interruptionLevel,
                    rules: ["N11"],
                    notes: ["more than \(config.bursts.coalesceAbovePerSecond) updates per second: coalesced, the last one is kept"])
                log(app, id, d, at: now)
                effects.append(.emit(.decided(app: app, identifier: id, decision: d)))
                effects.append(.reply(.accepted(identifier: id, decision: d)))
                return
            }
            recent.append(now)
            state.history.updates[app] = recent
        }
        let (decision, _) = deliver(request, app: app, peerPath: peerPath, peerProblem: peerProblem, at: now, origin: .request)
        effects.append(.reply(.accepted(identifier: id, decision: decision)))
    }

    /// N12: the app sets its badge; kept only if badges are on for it.
    mutating func setBadgeRequest(app: String, count: Int) {
        guard (0...NotificationPolicy.maximumBadge).contains(count) else { return fail(.badRequest, "badge \(count) is not 0…\(NotificationPolicy.maximumBadge) (N12)") }
        let record = state.apps[app] ?? NotificationAppRecord()
        if let why = record.notAuthorizedReason { return fail(.notAuthorized, why) }
        if record.badgesOn { setBadge(app, count) }
        effects.append(.reply(.done))
    }

    /// N8: why a new notification of `app` may not wait for its trigger (the app's or all apps'
    /// pending limit is reached), or nil if it may. One with the identifier of a pending one
    /// replaces it (N10) and is not counted twice.
    func n8PendingLimit(app: String, identifier: String) -> String? {
        var mine = 0, replacing = false
        for p in state.pending where p.app == app {
            mine += 1
            if p.request.identifier == identifier { replacing = true }
        }
        if replacing { return nil }
        if mine >= config.maxPendingPerApp {
            return "the app has \(mine) notifications waiting for a trigger; at most \(config.maxPendingPerApp) (maxPendingPerApp)"
        }
        if state.pending.count >= config.maxPendingTotal {
            return "\(state.pending.count) notifications of all apps are waiting for a trigger; at most \(config.maxPendingTotal) (maxPendingTotal)"
        }
        return nil
    }

    /// N14: at most `maxActionsPerCategory` actions per category, else `tooManyActions` and nothing
    /// is registered. Replaces the app's categories.
    mutating func registerCategories(app: String, _ categories: [NotificationCategory]) {
        var seen: Set<String> = []
        for category in categories {
            guard !category.identifier.isEmpty, seen.insert(category.identifier).inserted else {
                return fail(.badRequest, "category identifiers must be non-empty and unique")
            }
            if category.actions.count > config.maxActionsPerCategory {
                return fail(.tooManyActions,
                            "category \"\(category.identifier)\" has \(category.actions.count) actions; at most \(config.maxActionsPerCategory) (N14)")
            }
            var actionIds: Set<String> = []
            for action in category.actions {
                guard !action.identifier.isEmpty else {
                    return fail(.badRequest, "an action identifier in \"\(category.identifier)\" is empty")
                }
                guard action.identifier != NotificationActionResponse.defaultAction, action.identifier != NotificationActionResponse.dismissAction else {
                    return fail(.badRequest, "action \"\(action.identifier)\" in \"\(category.identifier)\": default and dismiss are the system's own actions")
                }
                guard actionIds.insert(action.identifier).inserted else {
                    return fail(.badRequest, "action \"\(action.identifier)\" is given twice in \"\(category.identifier)\"; action identifiers are unique in a category")
                }
            }
        }
        state.apps[app, default: .init()].categories = Dictionary(uniqueKeysWithValues: categories.map { ($0.identifier, $0) })
        effects.append(.reply(.done))
    }

    /// N14: the user's response goes to the app now if it is connected, else it is queued until it
    /// connects. The answered notification leaves the center.
    mutating func respond(app: String, notification id: String, action: String, text: String?, at now: NotificationTime) {
        guard let n = state.deliveredIndex(of: id, app: app).map({ state.delivered[$0] }) else {
            return fail(.notFound, "no delivered notification \"\(id)\" of \(app)")
        }
        if action != NotificationActionResponse.defaultAction, action != NotificationActionResponse.dismissAction {
            let category = n.request.content.categoryIdentifier.flatMap { state.apps[app]?.categories[$0] }
            guard let a = category?.actions.first(where: { $0.identifier == action }) else {
                return fail(.notFound, "notification \"\(id)\" has no action \"\(action)\"")
            }
            if text != nil, a.textInputPlaceholder == nil { return fail(.badRequest, "action \"\(action)\" takes no text") }
        } else if text != nil {
            return fail(.badRequest, "action \"\(action)\" takes no text")
        }
        let response = NotificationActionResponse(actionIdentifier: action, notificationIdentifier: id, text: text, time: now)
        removeDelivered(app: app, where: { $0.request.identifier == id }, reason: "N14")
        effects.append(.emit(.actionResponse(app: app, response)))
        if state.apps[app]?.connected == true {
            effects.append(.sendToApp(app: app, response))
        } else if state.apps[app]?.viaBus != true {
            state.apps[app, default: .init()].queuedResponses.append(response)
        }  // a D-Bus app hears it from the bus (`ActionInvoked`, from the `actionResponse` above), never queued
        effects.append(.reply(.done))
    }

    /// N17: a standalone sound obeys the same authorization, level, focus, ringer, call and rate
    /// rules as a notification's sound. Within the per-app audible interval it is refused with
    /// `rateLimited`; otherwise the reply carries the decision (`delivered` = it plays) and the
    /// playback for the request's handler to carry out.
    mutating func play(_ request: NotificationPlayRequest, app: String, peerPath: String?, peerProblem: String? = nil, at now: NotificationTime) {
        let requested = request.interruptionLevel
        guard !request.sound.isEmpty, (0...1).contains(request.volume) else {
            return fail(.badRequest, "a play request needs a sound name and a volume 0…1")
        }
        let record = state.apps[app] ?? NotificationAppRecord()
        guard record.isAuthorized else {
            reject(.notAuthorized, app: app, identifier: "", level: requested, rule: "N1",
                   "the app is not authorized to make notification sounds", at: now)
            return
        }
        let (level, levelRules, levelNotes) = effectiveLevel(requested, app: app, record: record, peerPath: peerPath, peerProblem: peerProblem)
        var rules = ["N17"] + levelRules
        var notes = levelNotes
        let quiet = quietVerdict(record: record, app: app, sender: request.sender, level: level, repeatedCall: false)
        rules += quiet.rules
        notes += quiet.notes
        var sound: NotificationSoundDecision?
        if !quiet.silenced {
            let gate = soundGate(app: app, record: record, name: request.sound, volume: request.volume, level: level,
                                 thread: request.threadIdentifier, at: now)
            if gate.rateLimited {
                reject(.rateLimited, app: app, identifier: "", level: requested, rule: "N11",
                       gate.notes.joined(separator: "; "), at: now)
                return
            }
            sound = gate.sound
            rules += gate.rules
            notes += gate.notes
        }
        let outcome: NotificationDecision.Outcome = sound == nil ? .silenced
            : level < requested ? .downgraded(from: requested, to: level) : .delivered
        let decision = NotificationDecision(outcome: outcome, requestedLevel: requested, level: level, banner: false,
                                            sound: sound, rules: rules, notes: notes)
        log(app, "", decision, at: now)
        let playback = sound.map {
            NotificationSoundPlayback(app: app, notificationIdentifier: nil, name: $0.name, volume: $0.volume,
                                      bypassRingerAndFocus: $0.bypassRingerAndFocus, unmuteOutput: $0.unmuteOutput,
                                      duckOthers: true, decidedAt: now, thread: request.threadIdentifier)
        }
        effects.append(.reply(.played(decision, playback: playback)))
    }
}

/// Why a request is malformed whatever the state (``NotificationPolicy/requestProblem(_:at:config:)``):
/// the rule whose range it breaks, if one, and the reason. Its code is always `badRequest`.
public struct RequestProblem: Error, Sendable, Equatable {
    /// The rule id (`N3`, `N8`, `N9`, `N12`), nil for an empty identifier.
    public var rule: String?
    public var message: String
    public init(rule: String?, message: String) { self.rule = rule; self.message = message }
}

extension NotificationPolicy {
    /// The checks `notification.add` refuses with `badRequest` before it looks at the state: an
    /// empty identifier, a number out of range, a trigger that never fires or repeats too fast
    /// (N3, N8, N9, N12). Pure; `now` is the request's time (a calendar trigger's first date
    /// depends on it and on the config's time zone). Nil when the request is well formed.
    /// A remote message with such a request is malformed (REMOTE.md): it is answered as one
    /// without taking up its message id.
    public static func requestProblem(_ request: NotificationRequest, at now: NotificationTime,
                                      config: NotificationPolicyConfig) -> RequestProblem? {
        if case .failure(let p) = NotificationReducer(state: NotificationState(), config: config).requestProblem(request, at: now) { return p }
        return nil
    }
}

/// The bound on app records (``NotificationPolicyConfig/maxApps``).
extension NotificationReducer {
    /// Makes room for a record of `app`, not known yet, within `maxApps`: nothing to do under the
    /// bound; at it, the least recently seen records that may be forgotten (``NotificationAppRecord/mayBeForgotten``,
    /// and the app has nothing in the center, waiting for a trigger, held for the summary or
    /// coalesced) are forgotten, oldest `lastSeen` first (then by app id), and watchers told
    /// (`appForgotten`). False when not enough of them may go (those that may go are forgotten
    /// all the same). A lowered limit takes effect this way, as new apps come.
    mutating func makeRoomForNewApp(_ app: String) -> Bool {
        let excess = state.apps.count - config.maxApps + 1
        guard excess > 0 else { return true }
        var waiting: Set<String> = []
        for n in state.delivered { waiting.insert(n.app) }
        for p in state.pending { waiting.insert(p.app) }
        for h in state.summaryQueue { waiting.insert(h.app) }
        for h in state.coalesced { waiting.insert(h.app) }
        var candidates: [(seen: Double, app: String)] = []
        for (name, record) in state.apps where name != app && !waiting.contains(name) && record.mayBeForgotten {
            candidates.append((record.lastSeen?.secondsSince1970 ?? -Double.infinity, name))
        }
        // As many as may go, up to the excess, even when that is not enough: records kept past the
        // bound (connected apps) must not stop the others from going (a stranger's find: with the
        // kept ones at the bound, every new name that connected added a record for good).
        let forgotten = firstInOrder(excess, of: candidates, by: <)
        for f in forgotten {
            state.apps[f.app] = nil
            effects.append(.emit(.appForgotten(app: f.app)))
        }
        return forgotten.count == excess
    }
}

extension NotificationEvent {
    /// The app whose record the event may make when it has none (and so needs room for it,
    /// ``NotificationPolicyConfig/maxApps``); nil for events that make none.
    var appItRecords: String? {
        switch self {
        case let .requestAuthorization(app, _), let .setSettings(app, _), let .appConnected(app), let .registerRemote(app, _),
             let .registerCategories(app, _), let .busAppSeen(app, _):
            app
        default: nil
        }
    }
}
