import InterludeConfig
import InterludePolicy
import InterludeWire

/// Re-reading the config while the daemon runs (`SIGHUP`, `config.reload`): the new config
/// replaces the old one whole, or not at all; sessions, ducks, interruptions and the notification
/// state are kept.
extension Engine {
    /// What the daemon does to reload: re-read the config files, check them, and hand a good
    /// config to ``reload(config:)`` (and the sound folders to the sound player). It returns the
    /// files read and the keys kept until a restart (``reload(config:)``), or the config error
    /// (file, line, key) with the running config left as it was.
    public typealias Reloader = @Sendable () async -> Result<ReloadResult, WireError>

    /// Sets the daemon's ``Reloader`` (the composition root knows the folders and the sound player).
    public func setReloader(_ r: @escaping Reloader) { reloader = r }

    /// Puts a new config in force at once: focus modes and schedules (N7, N8), summary times (N9),
    /// entitlements (N3), burst limits (N11), the audio numbers (A2 duck level and ramps, A8 grace,
    /// A9 expiry) and the user's tools. The notification policy re-evaluates now (a schedule that
    /// now covers the present turns its focus on; a center over a lowered N11 limit drops its
    /// oldest, ``NotificationEvent/limitsChanged``), the audio deadlines are re-armed. Sessions,
    /// ducks in effect and the rest of the notification state are kept. Server limits (clients, bytes)
    /// and the socket keep the values they started with (``ConfigSchema/restartOnly``).
    /// - Returns: what was read, the restart-only keys whose new value differs from the one
    ///   the daemon started with, and the limits set against each other
    ///   (``InterludeConfig/contradictions(runningSince:)``: a restart-only key's new value is
    ///   said as what holds after a restart); both logged too.
    @discardableResult
    public func reload(config new: InterludeConfig) -> ReloadResult {
        let kept = new.restartOnlyDifferences(from: startedWith)
        config = new
        audioConfig = new.audioPolicy
        notifConfig = new.notificationPolicy
        removalAllowance.set(Self.removalAllowanceBytes(notifConfig))
        userTools = Set(new.strings("server.userTools"))
        sessionLimits = Self.sessionLimits(new)
        // A flood being counted goes on counting unless the rate changed: then what it counted
        // is said first.
        let budget = Self.noticeLineBudget(new)
        if budget?.perSecond != noticeBudget?.perSecond {
            finishNoticeFlood(" (server.logNotificationsPerSecond changed)")
            noticeBudget = budget
        }
        log("config reloaded from \(new.files.isEmpty ? "built-in defaults" : new.files.joined(separator: ", "))"
            + (kept.isEmpty ? "" : "; until a restart these keep the values the daemon started with: \(kept.joined(separator: ", "))"))
        let warnings = new.contradictions(runningSince: startedWith)
        for w in warnings { log("config: \(w)") }
        let dropped = applyLimitsNow()
        scheduleTick()
        return ReloadResult(files: new.files, keptUntilRestart: kept.isEmpty ? nil : kept, warnings: warnings.isEmpty ? nil : warnings,
                            dropped: dropped == 0 ? nil : dropped)
    }

    /// Applies N11's limits now (``NotificationEvent/limitsChanged``, at start and at a reload: a
    /// limit lowered drops the oldest over it at once) and logs how many it dropped. A failed save
    /// is logged; the next event tries again.
    /// - Returns: how many notifications were dropped (each app is told with `notificationRemoved`).
    @discardableResult
    func applyLimitsNow() -> Int {
        guard let step = try? submitNotification(.limitsChanged) else { return 0 }
        var dropped = 0, apps = Set<String>()
        for fx in step.effects {
            if case let .emit(.removed(app, ids, "N11")) = fx { dropped += ids.count; apps.insert(app) }
        }
        if dropped > 0 {
            log("center: the limits (bursts.maxDeliveredPerApp \(notifConfig.bursts.maxDeliveredPerApp), bursts.maxDeliveredTotal "
                + "\(notifConfig.bursts.maxDeliveredTotal)) dropped \(dropped) notification\(dropped == 1 ? "" : "s") of \(apps.count) app\(apps.count == 1 ? "" : "s") [N11]")
        }
        settle(step, waiter: nil)
        return dropped
    }

    /// `config.reload`: the user's tool asks the daemon to re-read its config (like `SIGHUP`).
    /// - Throws: `notAuthorized` for an app (the config is the user's), `badRequest` with the
    ///   config error (file, line, key) when a file is bad or a config folder named at start is gone
    ///   (`[configNotFound]`; the running config stays),
    ///   `internalError` when the daemon cannot reload.
    public func requestReload(client: Int) async throws(WireError) -> ReloadResult {
        guard actsForUser(try appOf(client)) else {
            throw WireError(.notAuthorized, "the config is the user's: only the apps named in server.userTools may reload it "
                            + "(the interlude CLI when the config names it); SIGHUP to the daemon always does")
        }
        guard let reloader else { throw WireError(.internalError, "this daemon cannot reload its config") }
        switch await reloader() {
        case let .success(result): return result
        case let .failure(error): throw error
        }
    }
}
