import Foundation
import InterludeConfig
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
    /// returns the reply (if the event has one) once the new state is durable (N15: nothing
    /// acknowledged is lost). The actor is not held meanwhile: the store commits off it (a group
    /// commit, `NotificationStoring.submit`), so audio requests and other notification requests
    /// run while this one waits for the disk. Effects and replies follow the order of the events.
    /// - Throws: `storageFailed` when the new state cannot be saved: none of the event's effects
    ///   happen, and the state is the one the store holds.
    ///
    /// The event is reduced in a task below request priority: the actor runs a `session.activate`
    /// (or any audio request) that arrives during a notification burst before the queued
    /// notification work, so audio decisions do not wait behind it (issue 9).
    @discardableResult
    func notifyDurably(_ event: NotificationEvent) async throws(WireError) -> NotificationReply? {
        do {
            return try await withCheckedThrowingContinuation { (c: CheckedContinuation<NotificationReply?, any Error>) in
                Task(priority: .low) { self.submitAndAwaitCommit(event, waiter: .continuation(c)) }
            }
        } catch let e as WireError {
            throw e
        } catch {
            throw WireError(.storageFailed, "\(error)")
        }
    }

    /// Reduces and submits `event`, then answers `waiter` when the state is durable (at once if
    /// nothing waits before it and nothing had to be written).
    func submitAndAwaitCommit(_ event: NotificationEvent, waiter: CommitWaiter) {
        let step: NotificationStep
        do { step = try submitNotification(event) } catch {
            waiter.resume(throwing: error)
            return
        }
        settle(step, waiter: waiter)
    }

    /// N15: carries out a step's effects and answers its waiter at once if nothing waits before it
    /// and its state needed no commit or is durable already; else queues it for ``drainCommits()``,
    /// which does both, in order, when its commit is durable. The one place where a step meets
    /// the commit queue (single requests, batches of adds, remote batches, the daemon's own events).
    func settle(_ step: NotificationStep, waiter: CommitWaiter?) {
        if awaitingCommit.isEmpty, case .some(nil) = step.commit.known {
            // Its events and its reply leave together, as from ``settleCommittedSteps()``.
            OutputGathering.gather {
                carryOut(step.effects)
                waiter?.resume(returning: step.reply)
            }
            return
        }
        awaitingCommit.append(step, waiter: waiter)
        drainCommits()
    }

    /// `notifyDurably` for the daemon's own events (ticks, presence, the call state): nobody
    /// waits for the reply; the effects happen when the state is durable, in order.
    @discardableResult
    func notify(_ event: NotificationEvent) throws(WireError) -> NotificationReply? {
        let step = try submitNotification(event)
        settle(step, waiter: nil)
        return step.reply
    }

    /// One event reduced and its state handed to the store: what waits for the commit.
    struct NotificationStep: Sendable {
        var commit: NotificationCommit
        var effects: [NotificationEffect]
        var reply: NotificationReply?
    }

    /// Who waits for an event's reply: a request's task, or a pipelined `notification.add`
    /// (``beginAddNotifications(client:_:whenSettled:)``) whose reply is taken later.
    enum CommitWaiter: Sendable {
        case continuation(CheckedContinuation<NotificationReply?, any Error>)
        case promise(NotificationReplyPromise)

        func resume(returning reply: NotificationReply?) {
            switch self {
            case let .continuation(c): c.resume(returning: reply)
            case let .promise(p): p.fulfill(.success(reply))
            }
        }
        func resume(throwing error: any Error) {
            switch self {
            case let .continuation(c): c.resume(throwing: error)
            case let .promise(p): p.fulfill(.failure(error))
            }
        }
    }

    /// The events waiting for their commit, oldest first, each with the request waiting for it.
    struct CommitQueue {
        private var items: [(step: NotificationStep, waiter: CommitWaiter?)] = []
        private var head = 0
        /// Whether the drain task runs.
        var draining = false
        var isEmpty: Bool { head == items.count }
        mutating func append(_ step: NotificationStep, waiter: CommitWaiter?) {
            items.append((step, waiter))
        }
        mutating func popFirst() -> (step: NotificationStep, waiter: CommitWaiter?)? {
            guard head < items.count else { return nil }
            let item = items[head]
            head += 1
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 256, head * 2 >= items.count {
                items.removeFirst(head)  // a queue that never empties under load must not keep what it did
                head = 0
            }
            return item
        }
        var first: NotificationStep? { head < items.count ? items[head].step : nil }
    }

    /// Reduces `event` and submits the new state (unless only presence changed, which need not
    /// persist). A store that fails at once leaves the state as before the event.
    func submitNotification(_ event: NotificationEvent) throws(WireError) -> NotificationStep {
        let before = notifState
        let now = NotificationTime(clock.wallTime)
        let fx = NotificationPolicy.reduce(&notifState, event, now: now, config: notifConfig)
        let commit = try submitState(since: before)
        scheduleNotificationTick()
        return NotificationStep(commit: commit, effects: fx, reply: fx.lazy.compactMap {
            if case let .reply(r) = $0 { r } else { nil }
        }.last)
    }

    /// Submits the state as it is now, if it differs from `before` in more than presence (which
    /// need not persist; N15). A store that fails at once puts the state back to `before`, takes
    /// the store's durable state, and throws `storageFailed`.
    func submitState(since before: NotificationState) throws(WireError) -> NotificationCommit {
        guard let store, notifState != before, !notifState.differsOnlyInPresence(from: before) else { return .durable }
        let commit = store.submit(notifState)
        if case let .some(error?) = commit.known {
            log("cannot save the notification state: \(error) [N15]")
            notifState = before
            _ = store.recoverAfterFailedCommit().map(takeDurableState)
            throw WireError(.storageFailed, "the notification state cannot be saved: \(error)")
        }
        return commit
    }

    /// Carries out the waiting events in order: each one's effects and answer when its state is
    /// durable, or its failure (and the store's durable state) when not. Runs until the first
    /// event whose commit is still in flight, then asks that commit to call back
    /// (``settleCommittedSteps()``).
    func drainCommits() {
        guard !awaitingCommit.draining else { return }
        awaitingCommit.draining = true
        settleCommittedSteps()
    }

    /// The drain's steps, on the engine: settles the events whose commits are known, oldest first.
    /// When the first one's commit is in flight, the commit calls back on the store's thread, which
    /// hops onto the engine itself (the engine's executor runs the job on that thread when the
    /// engine is free): one thread wake-up per commit fewer than awaiting it, whose continuation
    /// resumes on Swift's pool first (issue 9). Below request priority, so an audio request
    /// (`session.activate`) that arrived meanwhile runs first. The lines one step sends to an app
    /// (its events, then its reply) are written together (``OutputGathering``); each step's as
    /// soon as it is settled: gathering a whole commit's replies sent them to every client at
    /// once, whose next requests then came at once too, and an activation arriving in that wave
    /// waited for a core (p90 0.6 → 2.9 ms in the bench's burst; issue 9).
    func settleCommittedSteps() {
        while let step = awaitingCommit.first {
            guard let error = step.commit.settledNow() else {
                // Called once the commit is settled, which `settledNow` then says.
                step.commit.whenSettled { _ in
                    Task.immediate(priority: .low) { await self.settleCommittedSteps() }
                }
                return
            }
            guard let item = awaitingCommit.popFirst() else { break }
            if let error {
                log("cannot save the notification state: \(error) [N15]")
                if let durable = store?.recoverAfterFailedCommit() { takeDurableState(durable) }
                item.waiter?.resume(throwing: WireError(.storageFailed, "the notification state cannot be saved: \(error)"))
            } else {
                OutputGathering.gather {
                    carryOut(item.step.effects)
                    item.waiter?.resume(returning: item.step.reply)
                }
            }
            // One commit may hold a hundred requests, their effects all due now: an audio
            // request that arrived meanwhile runs before the rest of them, not after (issue 9).
            if executor.audioJobWaiting, !awaitingCommit.isEmpty {
                Task(priority: .low) { self.settleCommittedSteps() }
                return
            }
        }
        awaitingCommit.draining = false
    }

    /// After a failed commit: the store's durable state becomes the engine's, with the apps'
    /// presence as it is now (presence is not persisted).
    func takeDurableState(_ durable: NotificationState) {
        var state = durable
        for (app, record) in notifState.apps where state.apps[app] != nil { state.apps[app]!.connected = record.connected }
        notifState = state
        scheduleNotificationTick()
    }

    /// The most bytes the identifiers of one `notificationRemoved` event may take as written
    /// (32 KiB): a removal of many notifications (a lowered N11 limit, `center clear`) comes as
    /// several events, in order. As one event, 1,100 identifiers of 1 KB went over
    /// `server.maxOutputBytes` and the daemon dropped the app and every watcher it was telling (a
    /// stranger's find). Counted as written, not as UTF-8 bytes alone: 32 KiB of one-byte
    /// identifiers are 130 KB of JSON, above the smallest `maxOutputBytes` (64 KiB). The parts are
    /// paced (``EngineEvent/paced``): those past `maxOutputBytes` wait for the peer to read, up to
    /// `maxPacedBytes` (8 × `maxOutputBytes`), instead of closing its connection.
    static let maxRemovedEventBytes = 32 * 1024

    /// At most what `id` takes in a JSON array: its quotes and comma, and each byte twice (an
    /// escaped quote or backslash, U+2028 written as a six-byte escape).
    static func writtenBytes(_ id: String) -> Int { 3 + 2 * id.utf8.count }

    /// The most one removal can tell one connection, in bytes as written, at `config`'s limits:
    /// every identifier the center, the summary and the pending requests can hold
    /// (2 × `bursts.maxDeliveredTotal` + `maxPendingTotal`), each of 1,024 bytes written at most
    /// twice over (``writtenBytes(_:)``), twice (its `notificationRemoved` events and a
    /// `notification.remove` reply): 12.3 MB at the default limits. A connection may hold that
    /// much of paced lines (``removalAllowance``) besides `server.maxOutputBytes`: a fixed
    /// 8 × `maxOutputBytes` cut every reader off a removal of a default center of 1 KiB
    /// identifiers at `maxOutputBytes` 64 KiB (a stranger's find).
    public static func removalAllowanceBytes(_ config: NotificationPolicyConfig) -> Int {
        let identifiers = 2 * config.bursts.maxDeliveredTotal + config.maxPendingTotal
        // Each identifier as ``writtenBytes(_:)`` counts one of the longest the policy takes.
        return 2 * identifiers * (3 + 2 * NotificationPolicy.maximumIdentifierBytes)
    }

    /// `identifiers` in order, cut into runs whose ``writtenBytes(_:)`` add up to at most
    /// `maxBytes` (at least one identifier each; an identifier is at most 1024 bytes).
    static func removedEventParts(_ identifiers: [String], maxBytes: Int = maxRemovedEventBytes) -> [[String]] {
        var parts: [[String]] = [], part: [String] = [], bytes = 0
        for id in identifiers {
            let n = writtenBytes(id)
            if !part.isEmpty, bytes + n > maxBytes {
                parts.append(part)
                part = []
                bytes = 0
            }
            part.append(id)
            bytes += n
        }
        if !part.isEmpty || parts.isEmpty { parts.append(part) }
        return parts
    }

    /// The log line of an N11 removal: the app, how many, and the first 10 identifiers, each cut
    /// to its first 64 characters and an ellipsis (a lowered limit may drop thousands at once; one
    /// line held them all, 1.1 MB, and 10 whole identifiers of 1 KiB were still 10 KB).
    static func removalLogLine(app: String, identifiers ids: [String]) -> String {
        let shown = ids.prefix(10).map { $0.count > 64 ? $0.prefix(64) + "…" : $0 }.joined(separator: ",")
        let more = ids.count > 10 ? " and \(ids.count - 10) more (\(ids.count) in all)" : ""
        return "center: removed \(app)/\(shown)\(more), over the center's limits [N11]"
    }

    /// The budget of the per-notification log lines (``logNotice(_:)``) for `config`:
    /// `server.logNotificationsPerSecond` a second after a burst of ten times as many; nil (every
    /// line) at 0.
    static func noticeLineBudget(_ config: InterludeConfig) -> LogLineBudget? {
        let rate = config.number("server.logNotificationsPerSecond")
        return rate > 0 ? LogLineBudget(perSecond: rate, burst: 10 * rate) : nil
    }

    /// Logs one of the lines the engine writes per notification decided (delivered, held or
    /// refused, removed over N11, a remote message's receipt, its sound's S1 warning or failure) within ``noticeBudget``: during a
    /// flood the lines are counted, not made (the line is an autoclosure: a line left out costs no
    /// formatting). The log says when a flood begins; a timer sums it up every 10 s and says when
    /// it is over (``noticeTick()``). The latest decisions stay in the N16 decision log
    /// (`interlude explain ID`).
    func logNotice(_ line: @autoclosure () -> String) {
        guard var budget = noticeBudget else { return log(line()) }
        let verdict = budget.admit(at: clock.now)
        noticeBudget = budget
        switch verdict {
        case .write:
            log(line())
        case .floodBegins:
            log("notification lines over \(Int(budget.perSecond)) a second: counted, not logged, and summed up every "
                + "\(Int(budget.sumEvery)) s until \(Int(budget.sumEvery)) s come within that rate; `interlude explain ID` shows the latest decisions [N16]")
            armNoticeTick()
        case .leaveOut:
            break
        }
    }

    /// During a flood of notification lines: sums it up every `sumEvery` seconds (10), and says
    /// when it is over (``LogLineBudget/tick(at:)``).
    func noticeTick() {
        noticeTimer.fired()
        guard var budget = noticeBudget, let tick = budget.tick(at: clock.now) else { return }
        noticeBudget = budget
        logNoticeTick(tick)
        if case .sum = tick { armNoticeTick() }
    }

    /// Ends a flood of notification lines now, saying what it left out (a reload that changes
    /// the rate, the daemon's stop).
    func finishNoticeFlood(_ why: String) {
        guard var budget = noticeBudget, let tick = budget.finish(at: clock.now) else { return }
        noticeBudget = budget
        noticeTimer.arm(nil, clock: clock) {}
        logNoticeTick(tick, why: why)
    }

    /// Logs a flood's sum, or its end with `why` it ended when not by the rate.
    func logNoticeTick(_ tick: LogLineBudget.Tick, why: String = "") {
        let (count, seconds, over) = switch tick {
        case let .sum(count, seconds): (count, seconds, false)
        case let .over(count, seconds): (count, seconds, true)
        }
        log("\(count) notification line\(count == 1 ? "" : "s") not logged in the last \(String(format: "%.1f s", seconds))"
            + (over ? "; the flood is over\(why)" : "") + " [N16]")
    }

    /// Asks for the flood's next sum in `sumEvery` seconds.
    func armNoticeTick() {
        guard let budget = noticeBudget else { return }
        noticeTimer.arm(clock.now + budget.sumEvery, clock: clock) { [weak self] in await self?.noticeTick() }
    }

    /// Carries out a notification event's effects (its reply goes back to the caller).
    func carryOut(_ fx: [NotificationEffect]) {
        for e in fx {
            switch e {
            case .reply: break
            case let .deliver(n):
                // "late": a trigger missed while the daemon was down, shown now (N15).
                logNotice("notification \(n.app)/\(n.request.identifier) \(n.decision.outcome)\(n.late ? " late" : "") sound=\(n.decision.sound.map { "\($0.name)@\($0.volume)" } ?? "none") [\(n.decision.rules.joined(separator: ","))]")
            case let .playSound(p): playNotificationSound(p)
            case let .emit(w): route(w)
            case let .badgeChanged(app, count):
                publish(NotificationEventName.badgeChanged, .object(["app": .string(app), "count": .number(Double(count))]), to: .app(app, always: true))
            case let .sendToApp(app, response):
                // The response itself goes to the app only; the user's tools get the watcher copy (.emit).
                publish(NotificationEventName.actionResponse, (try? JSONValue(encoding: response)) ?? .null,
                        to: .appOnly(app, always: true))
            }
        }
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
        if stopping {
            log("sound \(p.name) for \(p.app)/\(p.notificationIdentifier ?? "-") not played: the daemon is stopping")
            return
        }
        let audio = self.audio
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
            let key = p.notificationIdentifier.map { PlayedSounds.Key(app: p.app, identifier: $0) }
            do {
                let r = try await sounds.play(name, volume: volume, properties: props)
                // One line per notification's sound: within the flood budget, as its decision's line (N16).
                if let w = r.warning { self.logNotice("sound \(name): \(w) → played \(r.played) [S1]") }
                if let key { self.playedSounds.record(PlayedSound(requested: name, played: r.played, warning: r.warning), for: key) }
                played["played"] = .string(r.played)
                played["duration"] = .number(r.duration)
                if let w = r.warning { played["warning"] = (try? JSONValue(encoding: w)) ?? .null }
                let data = JSONValue.object(played)
                self.publish(WireEventName.soundPlayed, data, to: .app(p.app, always: true))
                if restoreMute {
                    try? await Task.sleep(nanoseconds: UInt64((r.duration + 0.1) * 1e9))
                }
            } catch {
                self.logNotice("sound \(name) failed: \(error)")
                // Nobody heard it: it does not count as the app's audible alert (N11).
                self.soundNotHeard(p)
                let e = (error as? WireError) ?? WireError(.soundFailed, "\(error)")
                if let key { self.playedSounds.record(PlayedSound(requested: name, played: "none", warning: e), for: key) }
                played["played"] = .string("none")
                played["duration"] = .number(0)
                played["warning"] = (try? JSONValue(encoding: e)) ?? .null
                let data = JSONValue.object(played)
                self.publish(WireEventName.soundPlayed, data, to: .app(p.app, always: true))
            }
            if restoreMute, let audio { await audio.setOutputMuted(true) }
        }
    }

    /// Watcher events go to the app they are about and the user's subscribed tools, never to
    /// another app (``EventAudience``); views carry N13's placeholder for hidden previews.
    func route(_ w: NotificationWatcherEvent) {
        @Sendable func enc<T: Encodable & SendableMetatype>(_ v: T) -> JSONValue { (try? JSONValue(encoding: v)) ?? .null }
        busObserve(w)  // bus notifications' signals (Engine+Bus.swift)
        switch w {
        case let .delivered(view, decision):
            publish(NotificationEventName.delivered, .object(["notification": enc(view), "decision": enc(decision)]), to: .app(view.app, always: true))
        case let .updated(view, decision):
            publish(NotificationEventName.updated, .object(["notification": enc(view), "decision": enc(decision)]), to: .app(view.app, always: true))
        case let .removed(app, ids, reason):
            // The daemon's own removals are said in the log, as deliveries are (the app's and the
            // user's own removals are theirs to know). Not a "notification APP/ID" line: those say
            // what is in the center now, and log readers count them as deliveries.
            if reason == "N11" { logNotice(Self.removalLogLine(app: app, identifiers: ids)) }
            for part in Self.removedEventParts(ids) {
                publish(NotificationEventName.removed, .object(["app": .string(app), "identifiers": enc(part), "reason": .string(reason)]),
                        to: .app(app, always: true), paced: true)
            }
        case let .decided(app, id, decision):
            // Held or refused; a badge-only request (N12) is decided "delivered" but puts nothing in
            // the center.
            let what = decision.outcome == .delivered ? "badge only, nothing in the center" : "\(decision.outcome)"
            logNotice("not delivered: \(app)/\(id) \(what) [\(decision.rules.joined(separator: ","))]")
            publish(NotificationEventName.decided, .object(["app": .string(app), "identifier": .string(id), "decision": enc(decision)]), to: .app(app))
        case let .actionResponse(app, response):
            // The user's typed reply: the app gets it (.sendToApp, or queued), the user's tools this copy.
            publish(NotificationEventName.actionResponse, .object(["app": .string(app), "response": enc(response)]), to: .userTools)
        case let .focusChanged(focus, previous, manual):
            log("focus \(previous ?? "off") → \(focus ?? "off")\(focus == nil ? "" : manual ? " (manual)" : " (schedule)") [N7]")
            publish(NotificationEventName.focusChanged, .object(["focus": focus.map { .string($0) } ?? .null,
                                                                 "previous": previous.map { .string($0) } ?? .null, "manual": .bool(manual)]),
                    to: .subscribers)
        case let .summaryDelivered(views):
            // The user's tools see the whole batch; each subscribed app only its own part.
            publish(NotificationEventName.summaryDelivered, .object(["notifications": enc(views)]), to: .userTools)
            for app in Set(views.map(\.app)).sorted() {
                publish(NotificationEventName.summaryDelivered, .object(["notifications": enc(views.filter { $0.app == app })]), to: .appOnly(app))
            }
        case let .missedDuringFocus(focus, missed):
            publish(NotificationEventName.missedDuringFocus, .object(["focus": .string(focus), "missed": enc(missed)]), to: .userTools)
            for app in Set(missed.map(\.app)).sorted() {
                publish(NotificationEventName.missedDuringFocus, .object(["focus": .string(focus), "missed": enc(missed.filter { $0.app == app })]),
                        to: .appOnly(app))
            }
        case let .authorizationRequested(app, options):
            publish(NotificationEventName.authorizationRequested, .object(["app": .string(app), "options": enc(options)]), to: .app(app))
        case let .settingsChanged(app, settings):
            publish(NotificationEventName.settingsChanged, .object(["app": .string(app), "settings": enc(settings)]), to: .app(app, always: true))
        case let .appForgotten(app):
            // The app is gone from the daemon's records: only the user's tools hear of it.
            log("apps: forgot \(app) (no choice of the user's, nothing waiting) to stay within maxApps \(notifConfig.maxApps)")
            publish(NotificationEventName.appForgotten, .object(["app": .string(app)]), to: .userTools)
        }
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

    nonisolated func expect(_ reply: NotificationReply?) throws(WireError) -> NotificationReply {
        switch reply {
        case nil: throw WireError(.internalError, "the notification policy gave no reply")
        case let .failed(code, message, _)?:
            throw WireError(WireErrorCode(rawValue: code.rawValue) ?? .badRequest, message)
        case let r?: return r
        }
    }

    // MARK: Methods

    /// `notification.requestAuthorization` (N1).
    public func requestAuthorization(client: Int, _ p: RequestAuthorizationParams) async throws(WireError) -> AuthorizationResult {
        let app = try appOf(client)
        guard case let .authorization(status, options) = try expect(await notifyDurably(.requestAuthorization(app: app, options: p.options))) else {
            throw WireError(.internalError, "unexpected reply")
        }
        return AuthorizationResult(status: status, options: options)
    }

    /// `notification.add`: the decision comes back with the rules that made it (N16). A batch of
    /// one (``beginAddNotifications(client:_:whenSettled:)``): one way for every add to be decided.
    public func addNotification(client: Int, _ p: AddNotificationParams) async throws(WireError) -> AddNotificationResult {
        try await beginAddNotifications(client: client, [.success(p)])[0].result()
    }

    /// `notification.add` for a batch of one connection's pipelined requests (issue 9): each is
    /// decided now, in order, as by ``addNotification(client:_:)``, and the state after the batch
    /// is handed to the store once: one engine call, one state diff and one commit for the batch
    /// instead of one each, and the connection's next requests are decided while this commit is
    /// in flight (group commit). Effects and replies keep the order of the requests. Each reply comes from its ``PendingNotificationAdd/result()`` once the
    /// batch's state is durable (N15); a request refused before the decision (`badRequest`,
    /// `helloRequired`) has its error there at once, in its place. If the commit fails, every
    /// request of the batch fails with `storageFailed` and none of them stays.
    ///
    /// An audio request that arrives while the batch is decided does not wait for the whole batch
    /// (16 decisions can take half a millisecond): the requests decided so far are handed to the
    /// store as a batch of their own, the audio request runs, and the rest follow as another.
    /// - Parameters:
    ///   - batch: the params in the order the requests came; a params that could not be decoded
    ///     is its error.
    ///   - whenSettled: called with each request's index in `batch` and its outcome, as
    ///     ``PendingNotificationAdd/whenSettled(_:)`` but registered before the request is decided:
    ///     it runs on the thread that settles the commit, inside the settle's ``OutputGathering``
    ///     scope, so a reply written there leaves in one `send` with the events of the same
    ///     request (registered after this call returns, it ran once the handler was back, and the
    ///     reply was a `send` and a client wake-up of its own; issue 9). Short, and must not wait.
    ///     With it, the pending replies returned must not be asked again.
    /// - Returns: one pending reply per request, in order.
    public func beginAddNotifications(client: Int, _ batch: [Result<AddNotificationParams, WireError>],
                                      whenSettled: (@Sendable (Int, Result<AddNotificationResult, WireError>) -> Void)? = nil) async -> [PendingNotificationAdd] {
        var pendings: [PendingNotificationAdd] = []
        pendings.reserveCapacity(batch.count)
        var next = batch.startIndex
        while next < batch.endIndex {
            next = decideAdds(client: client, batch, from: next, into: &pendings, whenSettled: whenSettled,
                              pauseWhen: { notificationBatchPause(executor) })
            if next < batch.endIndex { await Task.yield() }  // the audio lane first
        }
        return pendings
    }

    /// Replaces ``notificationBatchPause`` (tests: a split that does not depend on timing).
    func setNotificationBatchPauseForTest(_ pause: @escaping @Sendable (EngineExecutor) -> Bool) {
        notificationBatchPause = pause
    }

    /// Decides `batch[from...]` in order until all are decided or `pauseWhen` says to stop (checked
    /// after each decision, so at least one is decided), hands their state to the store as one
    /// commit, and appends their pending replies (each with `whenSettled` registered, if given,
    /// before it is decided). Returns where the rest begins.
    func decideAdds(client: Int, _ batch: [Result<AddNotificationParams, WireError>], from start: Int,
                    into pendings: inout [PendingNotificationAdd],
                    whenSettled: (@Sendable (Int, Result<AddNotificationResult, WireError>) -> Void)? = nil,
                    pauseWhen: () -> Bool) -> Int {
        let before = notifState
        let now = NotificationTime(clock.wallTime)
        var decided: [(effects: [NotificationEffect], reply: NotificationReply?, promise: NotificationReplyPromise)] = []
        var i = start
        while i < batch.endIndex {
            let params = batch[i], index = i
            i += 1
            let promise = NotificationReplyPromise()
            let pending = PendingNotificationAdd(engine: self, promise: promise)
            if let whenSettled { pending.whenSettled { whenSettled(index, $0) } }
            pendings.append(pending)
            do throws(WireError) {
                let p = try params.get()
                let app = try appOf(client)
                let request = try notificationRequest(p, now: now.secondsSince1970)
                let peer = entitlementPeer(client: client, app: app, level: request.content.interruptionLevel)
                let fx = NotificationPolicy.reduce(&notifState, .add(request, app: app, peerExecutablePath: peer.path, peerProblem: peer.problem),
                                                   now: now, config: notifConfig)
                decided.append((fx, fx.lazy.compactMap { if case let .reply(r) = $0 { r } else { nil } }.last, promise))
            } catch {
                promise.fulfill(.failure(error))
            }
            if pauseWhen() { break }
        }
        guard !decided.isEmpty else { return i }
        let commit: NotificationCommit
        do { commit = try submitState(since: before) } catch {
            for d in decided { d.promise.fulfill(.failure(error)) }
            return i
        }
        scheduleNotificationTick()
        for d in decided { settle(NotificationStep(commit: commit, effects: d.effects, reply: d.reply), waiter: .promise(d.promise)) }
        return i
    }

    /// The policy's request for `notification.add` params (also a remote message's, issue 11).
    /// An `at` trigger becomes the interval from `now` (seconds since 1970), which must be the
    /// `now` the policy decides the request at: a later clock reading here made it fire (and say
    /// it fires) that much before its time (`held until …22:59:59` for 23:00).
    /// - Throws: `badRequest` for an empty sound or a trigger that is not exactly one of in/at/calendar.
    func notificationRequest(_ p: AddNotificationParams, now: Double) throws(WireError) -> NotificationRequest {
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
                trigger = at > now ? .interval(seconds: at - now, repeats: false) : nil
            }
            if let c = t.calendar { trigger = .calendar(c, repeats: t.repeats ?? false) }
        }
        generatedIDs += 1
        let identifier = p.identifier ?? "n\(Int(clock.wallTime * 1000))-\(generatedIDs)"
        return NotificationRequest(identifier: identifier, content: content, trigger: trigger)
    }

    /// `notification.pending` / `notification.delivered`: one page of the listing, the center
    /// (oldest first) then the pending requests, from `offset`, at most `limit` entries and about
    /// ``listPageBytes`` of them (at least one), so that a reply never comes near
    /// `server.maxOutputBytes` (issue 7). Views honour hidden previews (N13).
    /// - Throws: `badRequest` for an offset below 0 or a limit outside 1…1000.
    public func listNotifications(client: Int, _ p: ListNotificationsParams) throws(WireError) -> NotificationListResult {
        let caller = try appOf(client)
        let everyone = p.all == true && actsForUser(caller)
        let app = try target(client, p.app)
        let offset = p.offset ?? 0
        let limit = p.limit ?? ListNotificationsParams.defaultLimit
        guard offset >= 0 else { throw WireError(.badRequest, "offset must be ≥ 0") }
        guard (1...ListNotificationsParams.maximumLimit).contains(limit) else {
            throw WireError(.badRequest, "limit must be 1…\(ListNotificationsParams.maximumLimit)")
        }
        let delivered = notifState.delivered.lazy.filter { everyone || $0.app == app }
        let pending = notifState.pending.lazy.filter { everyone || $0.app == app }
        let deliveredCount = delivered.count, pendingCount = pending.count
        var views: [NotificationView] = []
        var summaries: [PendingSummary] = []
        var bytes = 0
        var index = offset
        let budget = listPageBytes.value
        // Entries are encoded to measure them; a page ends before the entry that would pass the budget.
        func fits(_ size: Int) -> Bool {
            guard views.count + summaries.count < limit else { return false }
            if views.isEmpty && summaries.isEmpty { return true }
            return bytes + size <= budget
        }
        for n in delivered.dropFirst(offset) {
            let v = NotificationPolicy.view(of: n, in: notifState, config: notifConfig)
            let size = WireCoding.encodedSize(of: v) + 1
            guard fits(size) else { break }
            views.append(v); bytes += size; index += 1
        }
        if index >= deliveredCount {
            for q in pending.dropFirst(index - deliveredCount) {
                let s = PendingSummary(app: q.app, identifier: q.request.identifier, title: q.request.content.title,
                                       fireAt: q.fireAt.secondsSince1970, repeats: q.request.trigger?.repeats ?? false)
                let size = WireCoding.encodedSize(of: s) + 1
                guard fits(size) else { break }
                summaries.append(s); bytes += size; index += 1
            }
        }
        let more = index < deliveredCount + pendingCount
        let badges = everyone ? notifState.apps.compactMapValues { $0.badge == 0 ? nil : $0.badge }
                              : [app: notifState.apps[app]?.badge ?? 0]
        return NotificationListResult(notifications: views, pending: summaries, badges: badges, more: more,
                                      nextOffset: more ? index : nil, deliveredCount: deliveredCount, pendingCount: pendingCount)
    }

    /// `notification.remove`: returns the identifiers that were there and are gone.
    public func removeNotifications(client: Int, _ p: RemoveNotificationsParams) async throws(WireError) -> RemoveNotificationsResult {
        let app = try target(client, p.app)
        func present() -> Set<String> {
            let s = notifState
            return Set(s.pending.filter { $0.app == app }.map(\.request.identifier)
                       + s.delivered.filter { $0.app == app }.map(\.request.identifier)
                       + (s.summaryQueue + s.coalesced).filter { $0.app == app }.map(\.request.identifier))
        }
        let before = present()
        if p.all == true {
            _ = try expect(await notifyDurably(.removePending(app: app, identifiers: nil)))
            _ = try expect(await notifyDurably(.removeDelivered(app: app, identifiers: nil)))
        } else {
            if let ids = p.pending { _ = try expect(await notifyDurably(.removePending(app: app, identifiers: ids))) }
            if let ids = p.delivered { _ = try expect(await notifyDurably(.removeDelivered(app: app, identifiers: ids))) }
        }
        return RemoveNotificationsResult(removed: before.subtracting(present()).sorted())
    }

    /// `notification.setBadge` (N12).
    public func setBadge(client: Int, _ p: SetBadgeParams) async throws(WireError) {
        _ = try expect(await notifyDurably(.setBadge(app: try target(client, p.app), count: p.count)))
    }

    /// `notification.registerCategories` (N14).
    public func registerCategories(client: Int, _ p: RegisterCategoriesParams) async throws(WireError) {
        _ = try expect(await notifyDurably(.registerCategories(app: try appOf(client), p.categories)))
    }

    /// `notification.respond`: the user's response reaches the app, queued while it is offline (N14).
    public func respond(client: Int, _ p: RespondParams) async throws(WireError) {
        let app = try target(client, p.app)
        _ = try expect(await notifyDurably(.respondToAction(app: app, notificationIdentifier: p.notification, actionIdentifier: p.action, text: p.text)))
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
                             history: NotificationPolicy.history(app: app, identifier: p.identifier, in: notifState),
                             sound: playedSounds[PlayedSounds.Key(app: app, identifier: p.identifier)])
    }

    /// `notification.getSettings`.
    public func settings(client: Int, _ p: SettingsParams) throws(WireError) -> NotificationAppSettings {
        let app = try target(client, p.app)
        return notifState.apps[app]?.settings ?? NotificationAppSettings()
    }

    /// `notification.setSettings`: the user's settings for an app (N2). Only the user's tool may.
    public func setSettings(client: Int, _ p: SettingsParams) async throws(WireError) -> NotificationAppSettings {
        guard actsForUser(try appOf(client)), let app = p.app else {
            throw WireError(.notAuthorized, "settings belong to the user: use the interlude CLI (settings APP KEY=VALUE)")
        }
        try Engine.checkAppID(app)
        _ = try expect(await notifyDurably(.setSettings(app: app, p.change)))
        return notifState.apps[app]?.settings ?? NotificationAppSettings()
    }

    /// `focus.set` (N7): on by name (optionally until a time or for a duration), or off.
    public func setFocus(client: Int, _ p: FocusSetParams) async throws(WireError) -> FocusStatusResult {
        guard actsForUser(try appOf(client)) else {
            throw WireError(.notAuthorized, "focus belongs to the user: use the interlude CLI (focus on NAME)")
        }
        if p.name == nil, p.until != nil || p.for != nil {
            throw WireError(.badRequest, "until and for end a focus being turned on; with name null (focus off) there is nothing for them to end")
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
        _ = try expect(await notifyDurably(.setFocus(name: p.name, until: until)))
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

/// The last ``PlayedSound`` of each of the newest `capacity` notifications (by app and identifier),
/// for `notification.explain` (S1). Bounded: an app that floods the daemon with sounds pushes out
/// only the oldest entries, never grows it.
struct PlayedSounds {
    struct Key: Hashable { var app: String; var identifier: String }
    static let capacity = 1000
    private var entries: [Key: (serial: Int, sound: PlayedSound)] = [:]
    private var order: [(serial: Int, key: Key)] = []
    private var head = 0
    private var serial = 0

    subscript(_ key: Key) -> PlayedSound? { entries[key]?.sound }

    mutating func record(_ sound: PlayedSound, for key: Key) {
        serial += 1
        entries[key] = (serial, sound)
        order.append((serial, key))
        // Evict the oldest keys (order entries superseded by a newer record of the same key are skipped).
        while entries.count > Self.capacity, head < order.count {
            let (s, k) = order[head]
            head += 1
            if entries[k]?.serial == s { entries[k] = nil }
        }
        if order.count - head > 4 * Self.capacity {
            // One key recorded again and again: rebuild the order from the entries themselves.
            order = entries.map { (serial: $0.value.serial, key: $0.key) }.sorted { $0.serial < $1.serial }
            head = 0
        } else if head > 4096 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}

/// A reply that comes later, once (a pipelined request's, ``Engine/beginAddNotifications(client:_:whenSettled:)``).
/// Taken either by one waiting task (``value()``) or by one callback (``onFulfill(_:)``).
/// Under NSLock, not `Mutex`: ThreadSanitizer cannot see Mutex's futex on Linux (the store's note).
public final class NotificationReplyPromise: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<NotificationReply?, any Error>?
    private var waiter: CheckedContinuation<NotificationReply?, any Error>?
    private var callback: (@Sendable (Result<NotificationReply?, any Error>) -> Void)?

    init() {}

    /// Sets the outcome (once) and wakes the one waiting, or calls the callback (on this thread).
    func fulfill(_ r: Result<NotificationReply?, any Error>) {
        lock.lock()
        if let w = waiter {
            waiter = nil
            lock.unlock()
            w.resume(with: r)
        } else if let f = callback {
            callback = nil
            lock.unlock()
            f(r)
        } else {
            result = r
            lock.unlock()
        }
    }

    /// Waits for the outcome (one caller, and no callback).
    func value() async throws -> NotificationReply? {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<NotificationReply?, any Error>) in
            lock.lock()
            if let r = result {
                lock.unlock()
                c.resume(with: r)
            } else {
                waiter = c
                lock.unlock()
            }
        }
    }

    /// Calls `f` with the outcome: now if it is known, else on the thread that fulfills it (one
    /// callback, and no waiting task).
    func onFulfill(_ f: @escaping @Sendable (Result<NotificationReply?, any Error>) -> Void) {
        lock.lock()
        if let r = result {
            lock.unlock()
            f(r)
        } else {
            callback = f
            lock.unlock()
        }
    }
}

/// A `notification.add` decided and on its way to the disk (``Engine/beginAddNotifications(client:_:whenSettled:)``).
public struct PendingNotificationAdd: Sendable {
    let engine: Engine
    let promise: NotificationReplyPromise

    /// The reply, once the request's state is durable (N15).
    /// - Throws: the policy's refusal (`notAuthorized`, `badRequest`, …), `storageFailed` when the
    ///   state could not be saved.
    public func result() async throws(WireError) -> AddNotificationResult {
        let reply: NotificationReply?
        do { reply = try await promise.value() } catch let e as WireError { throw e } catch {
            throw WireError(.storageFailed, "\(error)")
        }
        return try Self.result(of: .success(reply), engine: engine).get()
    }

    /// Calls `f` with the reply once the request's state is durable (N15), or with its error (as
    /// ``result()``): at once if known, else on the thread that settles it, which is the engine's
    /// (`f` must be short and must not wait). Either this or ``result()``, once.
    public func whenSettled(_ f: @escaping @Sendable (Result<AddNotificationResult, WireError>) -> Void) {
        let engine = self.engine
        promise.onFulfill { f(Self.result(of: $0, engine: engine)) }
    }

    private static func result(of r: Result<NotificationReply?, any Error>, engine: Engine) -> Result<AddNotificationResult, WireError> {
        do throws(WireError) {
            let reply: NotificationReply?
            switch r {
            case let .failure(e as WireError): throw e
            case let .failure(e): throw WireError(.storageFailed, "\(e)")
            case let .success(r): reply = r
            }
            guard case let .accepted(id, decision) = try engine.expect(reply) else { throw WireError(.internalError, "unexpected reply") }
            return .success(AddNotificationResult(identifier: id, decision: decision))
        } catch {
            return .failure(error)
        }
    }
}
