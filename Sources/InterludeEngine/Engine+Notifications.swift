import InterludePolicy
import InterludeWire

/// The notification side of the engine: feeds `NotificationPolicy` (N1–N17), persists its state
/// before answering (N15: nothing acknowledged is lost), plays the sounds it decides, and routes
/// its events. The user's own tools (`server.userTools`: the `interlude` CLI, ``Engine/userToolApp``) act for the user:
/// its settings, focus and center commands name the app they act on.
extension Engine {
    /// The CLI's app id, the default of `server.userTools`: requests from it are the user's
    /// (settings, focus, center, `play`).
    public static let userToolApp = "org.interlude.CLI"

    /// Whether `app` acts for the user (`server.userTools`): it may change settings and focus
    /// (N2, N7), name another app's notifications, and play sounds without N17.
    func actsForUser(_ app: String) -> Bool { userTools.contains(app) }

    /// Feeds one event to the notification policy, persists, carries out the effects, and
    /// returns the reply (if the event has one).
    /// - Throws: `storageFailed` when the new state cannot be saved (N15): the state is then as
    ///   before the event and none of its effects happen.
    @discardableResult
    func notify(_ event: NotificationEvent) throws(WireError) -> NotificationReply? {
        let before = notifState
        let now = NotificationTime(clock.wallTime)
        let fx = NotificationPolicy.reduce(&notifState, event, now: now, config: notifConfig)
        if notifState != before, !notifState.differsOnlyInPresence(from: before), let store {
            do { try store.save(notifState) } catch {
                log("cannot save the notification state: \(error) [N15]")
                notifState = before
                throw WireError(.storageFailed, "the notification state cannot be saved: \(error)")
            }
        }
        var reply: NotificationReply?
        for e in fx {
            switch e {
            case let .reply(r): reply = r
            case let .deliver(n):
                log("notification \(n.app)/\(n.request.identifier) \(n.decision.outcome) sound=\(n.decision.sound.map { "\($0.name)@\($0.volume)" } ?? "none") [\(n.decision.rules.joined(separator: ","))]")
            case let .playSound(p): playNotificationSound(p)
            case let .emit(w): route(w)
            case let .badgeChanged(app, count):
                broadcast(NotificationEventName.badgeChanged, .object(["app": .string(app), "count": .number(Double(count))]), alsoTo: app)
            case let .sendToApp(app, response):
                let data = (try? JSONValue(encoding: response)) ?? .null
                sendToApp(app, NotificationEventName.actionResponse, data)
            }
        }
        scheduleNotificationTick()
        return reply
    }

    func scheduleNotificationTick() {
        let clock = self.clock
        // Wall-clock deadlines become monotonic sleeps: from now, that many seconds.
        notificationTimer.arm(NotificationPolicy.nextDeadline(notifState, config: notifConfig)?.secondsSince1970, clock: clock,
                              sleepUntil: { clock.now + max(0, $0 - clock.wallTime) }) { [weak self] in await self?.notificationTick() }
    }

    func notificationTick() {
        notificationTimer.fired()
        _ = try? notify(.tick)  // a failed save is logged; the next event tries again
    }

    /// Plays a decided sound: through the sample cache; a critical one unmutes a muted output for
    /// its length (N3) and is marked so that calls do not duck it.
    func playNotificationSound(_ p: NotificationSoundPlayback) {
        guard let sounds, p.volume > 0 else { return }
        let audio = self.audio
        let log = self.log
        var props = ["application.id": p.app, "interlude.notification": p.notificationIdentifier ?? ""]
        if let identity { props["interlude.daemon"] = identity }
        if p.bypassRingerAndFocus { props["interlude.critical"] = "1" }
        let name = p.name
        let volume = p.volume
        let unmute = p.unmuteOutput
        Task {
            var restoreMute = false
            if unmute, let audio, await audio.outputMuted() == true {
                await audio.setOutputMuted(false)
                restoreMute = true
            }
            // The app and subscribers hear what played, with the S1 warning if the requested sound
            // could not be used (the CLI's notify prints it).
            var played: [String: JSONValue] = [
                "app": .string(p.app), "requested": .string(name), "volume": .number(volume),
                "notification": .string(p.notificationIdentifier ?? ""),
            ]
            do {
                let r = try await sounds.play(name, volume: volume, properties: props)
                if let w = r.warning { log("sound \(name): \(w) → played \(r.played) [S1]") }
                played["played"] = .string(r.played)
                played["duration"] = .number(r.duration)
                if let w = r.warning { played["warning"] = (try? JSONValue(encoding: w)) ?? .null }
                self.broadcast(WireEventName.soundPlayed, .object(played), alsoTo: p.app)
                if restoreMute {
                    try? await Task.sleep(nanoseconds: UInt64((r.duration + 0.1) * 1e9))
                }
            } catch {
                log("sound \(name) failed: \(error)")
                let e = (error as? WireError) ?? WireError(.soundFailed, "\(error)")
                played["played"] = .string("none")
                played["duration"] = .number(0)
                played["warning"] = (try? JSONValue(encoding: e)) ?? .null
                self.broadcast(WireEventName.soundPlayed, .object(played), alsoTo: p.app)
            }
            if restoreMute, let audio { await audio.setOutputMuted(true) }
        }
    }

    /// Watcher events go to subscribers; an app's own notification events also to the app.
    func route(_ w: NotificationWatcherEvent) {
        func enc<T: Encodable>(_ v: T) -> JSONValue { (try? JSONValue(encoding: v)) ?? .null }
        switch w {
        case let .delivered(view, decision):
            broadcast(NotificationEventName.delivered, .object(["notification": enc(view), "decision": enc(decision)]), alsoTo: view.app)
        case let .updated(view, decision):
            broadcast(NotificationEventName.updated, .object(["notification": enc(view), "decision": enc(decision)]), alsoTo: view.app)
        case let .removed(app, ids, reason):
            broadcast(NotificationEventName.removed, .object(["app": .string(app), "identifiers": enc(ids), "reason": .string(reason)]), alsoTo: app)
        case let .decided(app, id, decision):
            broadcast(NotificationEventName.decided, .object(["app": .string(app), "identifier": .string(id), "decision": enc(decision)]))
        case let .actionResponse(app, response):
            broadcast(NotificationEventName.actionResponse, .object(["app": .string(app), "response": enc(response)]))
        case let .focusChanged(focus, previous, manual):
            log("focus \(previous ?? "off") → \(focus ?? "off")\(focus == nil ? "" : manual ? " (manual)" : " (schedule)") [N7]")
            broadcast(NotificationEventName.focusChanged, .object(["focus": focus.map { .string($0) } ?? .null,
                                                                   "previous": previous.map { .string($0) } ?? .null, "manual": .bool(manual)]))
        case let .summaryDelivered(views):
            broadcast(NotificationEventName.summaryDelivered, .object(["notifications": enc(views)]))
        case let .missedDuringFocus(focus, missed):
            broadcast(NotificationEventName.missedDuringFocus, .object(["focus": .string(focus), "missed": enc(missed)]))
        case let .authorizationRequested(app, options):
            broadcast(NotificationEventName.authorizationRequested, .object(["app": .string(app), "options": enc(options)]))
        case let .settingsChanged(app, settings):
            broadcast(NotificationEventName.settingsChanged, .object(["app": .string(app), "settings": enc(settings)]), alsoTo: app)
        }
    }

    func broadcast(_ name: String, _ data: JSONValue, alsoTo app: String?) {
        let event = WireEvent(event: name, data: data, time: clock.wallTime)
        for c in clients.values where c.subscribed || (app != nil && c.app == app) { c.sink(event) }
    }

    func sendToApp(_ app: String, _ name: String, _ data: JSONValue) {
        let event = WireEvent(event: name, data: data, time: clock.wallTime)
        for c in clients.values where c.app == app { c.sink(event) }
    }

    func appOf(_ client: Int) throws(WireError) -> String {
        guard let app = clients[client]?.app else { throw WireError(.helloRequired, "say hello first") }
        return app
    }

    /// The app a request acts on: the caller, or, for the user's tool, the app it names.
    func target(_ client: Int, _ named: String?) throws(WireError) -> String {
        let caller = try appOf(client)
        guard let named, named != caller else { return caller }
        guard actsForUser(caller) else {
            throw WireError(.notAuthorized, "an app may act only on its own notifications")
        }
        try Engine.checkAppID(named)
        return named
    }

    func expect(_ reply: NotificationReply?) throws(WireError) -> NotificationReply {
        switch reply {
        case nil: throw WireError(.internalError, "the notification policy gave no reply")
        case let .failed(code, message, _)?:
            throw WireError(WireErrorCode(rawValue: code.rawValue) ?? .badRequest, message)
        case let r?: return r
        }
    }

    // MARK: Methods

    /// `notification.requestAuthorization` (N1).
    public func requestAuthorization(client: Int, _ p: RequestAuthorizationParams) throws(WireError) -> AuthorizationResult {
        let app = try appOf(client)
        guard case let .authorization(status, options) = try expect(notify(.requestAuthorization(app: app, options: p.options))) else {
            throw WireError(.internalError, "unexpected reply")
        }
        return AuthorizationResult(status: status, options: options)
    }

    /// `notification.add`: the decision comes back with the rules that made it (N16).
    public func addNotification(client: Int, _ p: AddNotificationParams) throws(WireError) -> AddNotificationResult {
        let app = try appOf(client)
        var content = NotificationContent(title: p.title)
        content.subtitle = p.subtitle ?? ""
        content.body = p.body ?? ""
        if p.sound?.isEmpty == true { throw WireError(.badRequest, "sound must be a name or a path (or \"none\" for no sound), not empty") }
        content.sound = p.sound == "none" ? nil : p.sound
        content.criticalVolume = p.criticalVolume
        content.badge = p.badge
        content.threadIdentifier = p.thread
        content.categoryIdentifier = p.category
        content.interruptionLevel = p.level ?? .active
        content.relevanceScore = p.relevance ?? 0
        content.promotional = p.promotional ?? false
        content.alertOnce = p.alertOnce ?? false
        content.sender = p.sender
        content.isCall = p.isCall ?? false
        content.userInfo = p.userInfo ?? [:]
        var trigger: NotificationTrigger?
        if let t = p.trigger {
            let given = [t.in != nil, t.at != nil, t.calendar != nil].filter { $0 }.count
            guard given == 1 else { throw WireError(.badRequest, "trigger needs exactly one of in, at, calendar") }
            if let s = t.in { trigger = .interval(seconds: s, repeats: t.repeats ?? false) }
            if let at = t.at {
                guard at.isFinite else { throw WireError(.badRequest, "at must be a time (seconds since 1970)") }
                guard t.repeats != true else { throw WireError(.badRequest, "an at trigger fires once; use in or calendar to repeat") }
                // A time already past is now: delivered at once, decided as such (not "held").
                trigger = at > clock.wallTime ? .interval(seconds: at - clock.wallTime, repeats: false) : nil
            }
            if let c = t.calendar { trigger = .calendar(c, repeats: t.repeats ?? false) }
        }
        generatedIDs += 1
        let identifier = p.identifier ?? "n\(Int(clock.wallTime * 1000))-\(generatedIDs)"
        let request = NotificationRequest(identifier: identifier, content: content, trigger: trigger)
        guard case let .accepted(id, decision) = try expect(notify(.add(request, app: app, peerExecutablePath: clients[client]?.executable))) else {
            throw WireError(.internalError, "unexpected reply")
        }
        return AddNotificationResult(identifier: id, decision: decision)
    }

    /// `notification.pending` / `notification.delivered` (views honour hidden previews, N13).
    public func listNotifications(client: Int, _ p: ListNotificationsParams) throws(WireError) -> NotificationListResult {
        let caller = try appOf(client)
        let everyone = p.all == true && actsForUser(caller)
        let app = try target(client, p.app)
        let delivered = notifState.delivered.filter { everyone || $0.app == app }
            .map { NotificationPolicy.view(of: $0, in: notifState, config: notifConfig) }
        let pending = notifState.pending.filter { everyone || $0.app == app }.map {
            PendingSummary(app: $0.app, identifier: $0.request.identifier, title: $0.request.content.title,
                           fireAt: $0.fireAt.secondsSince1970, repeats: $0.request.trigger?.repeats ?? false)
        }
        let badges = everyone ? notifState.apps.compactMapValues { $0.badge == 0 ? nil : $0.badge }
                              : [app: notifState.apps[app]?.badge ?? 0]
        return NotificationListResult(notifications: delivered, pending: pending, badges: badges)
    }

    /// `notification.remove`: returns the identifiers that were there and are gone.
    public func removeNotifications(client: Int, _ p: RemoveNotificationsParams) throws(WireError) -> RemoveNotificationsResult {
        let app = try target(client, p.app)
        func present() -> Set<String> {
            let s = notifState
            return Set(s.pending.filter { $0.app == app }.map(\.request.identifier)
                       + s.delivered.filter { $0.app == app }.map(\.request.identifier)
                       + (s.summaryQueue + s.coalesced).filter { $0.app == app }.map(\.request.identifier))
        }
        let before = present()
        if p.all == true {
            _ = try expect(notify(.removePending(app: app, identifiers: nil)))
            _ = try expect(notify(.removeDelivered(app: app, identifiers: nil)))
        } else {
            if let ids = p.pending { _ = try expect(notify(.removePending(app: app, identifiers: ids))) }
            if let ids = p.delivered { _ = try expect(notify(.removeDelivered(app: app, identifiers: ids))) }
        }
        return RemoveNotificationsResult(removed: before.subtracting(present()).sorted())
    }

    /// `notification.setBadge` (N12).
    public func setBadge(client: Int, _ p: SetBadgeParams) throws(WireError) {
        _ = try expect(notify(.setBadge(app: try target(client, p.app), count: p.count)))
    }

    /// `notification.registerCategories` (N14).
    public func registerCategories(client: Int, _ p: RegisterCategoriesParams) throws(WireError) {
        _ = try expect(notify(.registerCategories(app: try appOf(client), p.categories)))
    }

    /// `notification.respond`: the user's response reaches the app, queued while it is offline (N14).
    public func respond(client: Int, _ p: RespondParams) throws(WireError) {
        let app = try target(client, p.app)
        _ = try expect(notify(.respondToAction(app: app, notificationIdentifier: p.notification, actionIdentifier: p.action, text: p.text)))
    }

    /// `notification.explain` (N16).
    public func explain(client: Int, _ p: ExplainParams) throws(WireError) -> ExplainResult {
        let caller = try appOf(client)
        var app = try target(client, p.app)
        if p.app == nil && actsForUser(caller) {
            // The user names only the identifier: the app that has it; if several do, say which.
            let apps = Set(notifState.decisionLog.filter { $0.identifier == p.identifier }.map(\.app)
                           + notifState.delivered.filter { $0.request.identifier == p.identifier }.map(\.app))
            if apps.count > 1 {
                throw WireError(.badRequest, "several apps have a notification \(p.identifier) (\(apps.sorted().joined(separator: ", "))): name one with app")
            }
            app = apps.first ?? caller
        }
        guard let d = NotificationPolicy.explain(app: app, identifier: p.identifier, in: notifState) else {
            throw WireError(.notFound, "no decision recorded for \(p.identifier)")
        }
        return ExplainResult(app: app, identifier: p.identifier, decision: d,
                             history: NotificationPolicy.history(app: app, identifier: p.identifier, in: notifState))
    }

    /// `notification.getSettings`.
    public func settings(client: Int, _ p: SettingsParams) throws(WireError) -> NotificationAppSettings {
        let app = try target(client, p.app)
        return notifState.apps[app]?.settings ?? NotificationAppSettings()
    }

    /// `notification.setSettings`: the user's settings for an app (N2). Only the user's tool may.
    public func setSettings(client: Int, _ p: SettingsParams) throws(WireError) -> NotificationAppSettings {
        guard actsForUser(try appOf(client)), let app = p.app else {
            throw WireError(.notAuthorized, "settings belong to the user: use the interlude CLI (settings APP KEY=VALUE)")
        }
        try Engine.checkAppID(app)
        _ = try expect(notify(.setSettings(app: app, p.change)))
        return notifState.apps[app]?.settings ?? NotificationAppSettings()
    }

    /// `focus.set` (N7): on by name (optionally until a time or for a duration), or off.
    public func setFocus(client: Int, _ p: FocusSetParams) throws(WireError) -> FocusStatusResult {
        guard actsForUser(try appOf(client)) else {
            throw WireError(.notAuthorized, "focus belongs to the user: use the interlude CLI (focus on NAME)")
        }
        let limit = NotificationPolicy.maximumScheduleSeconds
        var until = p.until.map(NotificationTime.init)
        if let u = p.until {
            guard u.isFinite, u - clock.wallTime <= limit else { throw WireError(.badRequest, "until must be within 10 years from now") }
        }
        if let f = p.for {
            guard f > 0, f <= limit else { throw WireError(.badRequest, "for must be positive seconds, at most 10 years") }
            until = NotificationTime(clock.wallTime + f)
        }
        _ = try expect(notify(.setFocus(name: p.name, until: until)))
        return focusStatus()
    }

    /// `focus.status`.
    public func focusStatus() -> FocusStatusResult {
        var until: Double?
        if case let .on(_, u)? = notifState.focus.override { until = u?.secondsSince1970 }
        return FocusStatusResult(focus: notifState.focus.active?.name, manual: notifState.focus.active?.manual ?? false,
                                 until: until, modes: notifConfig.focusModes.keys.sorted())
    }
}
