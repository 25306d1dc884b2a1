/// Something that happened, fed to `NotificationPolicy.reduce` in order.
///
/// Every event except `tick`, `appConnected`, `appDisconnected` and `setCallActive` produces
/// exactly one `.reply` effect for whoever sent it. Every event first advances the policy to `now`
/// (triggers fire, schedules begin or end, summaries and coalesced updates are released), so a
/// late `tick` loses nothing.
public enum NotificationEvent: Codable, Sendable, Equatable {
    /// An app asks for authorization with options (N1). Replies `.authorization`.
    case requestAuthorization(app: String, options: [NotificationAuthorizationOption])
    /// The user changes an app's settings (N2), e.g. from the CLI. Replies `.done`.
    case setSettings(app: String, NotificationSettingsChange)
    /// An app adds a notification request; `peerExecutablePath` is the peer process's executable
    /// (for N3), nil when it is unknown or cannot be trusted, and then `peerProblem` says why (the
    /// decision's N3 note). Replies `.accepted` with the decision, or `.failed`.
    case add(NotificationRequest, app: String, peerExecutablePath: String?, peerProblem: String? = nil)
    /// Remove pending (and held) requests of the app; nil = all. Replies `.done`.
    case removePending(app: String, identifiers: [String]?)
    /// Remove delivered (and held) notifications of the app, by the app or the user; nil = all.
    /// Replies `.done`.
    case removeDelivered(app: String, identifiers: [String]?)
    /// The app sets its badge (N12). Replies `.done`.
    case setBadge(app: String, count: Int)
    /// The app registers its categories, replacing earlier ones (N14). Replies `.done` or
    /// `.failed(tooManyActions)` with nothing registered.
    case registerCategories(app: String, [NotificationCategory])
    /// The user responds to a delivered notification (N14). Replies `.done` or `.failed(notFound)`.
    case respondToAction(app: String, notificationIdentifier: String, actionIdentifier: String, text: String?)
    /// The user turns focus `name` on (until an instant, or nil = until turned off) or off (nil
    /// name) (N7). Replies `.done` or `.failed(badRequest)` for an unknown name.
    case setFocus(name: String?, until: NotificationTime?)
    /// The ringer switch. Replies `.done`.
    case setRinger(silent: Bool)
    /// A call began or ended (from the audio side, A4). No reply.
    case setCallActive(Bool)
    /// A standalone sound from an app (N17). Replies `.played` with the decision, or `.failed`.
    case play(NotificationPlayRequest, app: String, peerExecutablePath: String?, peerProblem: String? = nil)
    /// A playback the rules decided (a notification's sound, or an app's standalone one; its
    /// ``NotificationSoundPlayback/decidedAt``) could not be played (the audio server away, no
    /// sound that works): the user heard nothing, so it was no audible alert. N11's per-app
    /// interval no longer counts from it, nor does its thread's cooldown (the next alert of the
    /// thread plays at full volume, as after a quiet minute). Changes nothing where the app's last
    /// audible alert, or the thread's last alert, is another one; nothing for a playback without a
    /// decision time. No reply.
    case soundNotPlayed(NotificationSoundPlayback)
    /// The app connected: queued action responses are sent (N14). Its record is made even past
    /// ``NotificationPolicyConfig/maxApps`` (connections are bounded). No reply.
    case appConnected(app: String)
    /// The app disconnected. No reply.
    case appDisconnected(app: String)
    /// Time passed (see `NotificationPolicy.nextDeadline`). No reply.
    case tick
    /// The config's limits may have changed (the daemon started, or reloaded its config): N11's
    /// limits apply at once, not at the next add. Each app over `maxDeliveredPerApp` drops its
    /// oldest, then the center over `maxDeliveredTotal` its oldest, and the scheduled summary
    /// what the center would not keep (N9); each app is told which (`removed`, reason `N11`).
    /// Notifications waiting for a trigger stay (N8 refuses new ones beyond its limits; it does
    /// not drop accepted ones). Time passes as for `tick`. No reply.
    case limitsChanged
    /// The app registers (or unregisters) for remote notifications (issue 11; N1). Replies `.done`.
    case registerRemote(app: String, enabled: Bool)
    /// A D-Bus client sent a notification of `app` (`Notify`): the app's record is made if there
    /// is none, marked as a D-Bus app's (``NotificationAppRecord/viaBus``); an app whose authorization is undetermined gets
    /// `answer` (the config's `bus.authorization`: D-Bus clients never ask; nil = `prompt`, left
    /// to the user), marked as the default's (N1), and watchers are told (`settingsChanged`).
    /// Replies `.done`, or `.failed(limitReached)` when a new app finds no room (``NotificationPolicyConfig/maxApps``).
    case busAppSeen(app: String, answer: NotificationAuthorizationStatus?)
    /// A remote notification from a provider through the broker (issue 11), with the provider's
    /// message id. A message id of the same app among the last `dedupeWindow` seen replies `.duplicate` and
    /// changes nothing (exactly once: the broker may deliver a message again). Otherwise the id is
    /// remembered and the request is decided as `.add` (with no peer executable: an N3 entitlement
    /// bound to an executable path does not cover it), after two checks of its own: the app registered for remote
    /// notifications (N1) and the user allows them for the app (N2, setting `remote`); either
    /// missing is a rejection (`notAuthorized`) recorded for explain (N16). Replies as `.add`.
    case addRemote(NotificationRequest, app: String, messageID: String, dedupeWindow: Int)
    /// Receipts of remote messages just decided, about to be published (REMOTE.md "Receipts are owed until the broker has them"):
    /// kept in ``NotificationState/owedReceipts`` until the broker acknowledges them, so that they
    /// are saved with their decisions and published again after a restart. Over
    /// ``NotificationPolicy/maxOwedReceipts`` the oldest go. No reply.
    case remoteReceiptsOwed([OwedReceipt])
    /// The broker acknowledged these receipts: each one's first equal entry leaves
    /// ``NotificationState/owedReceipts`` (one already gone changes nothing). No reply.
    case remoteReceiptsAcknowledged([OwedReceipt])
}

/// What the engine must do after a `reduce` call, in order.
public enum NotificationEffect: Codable, Sendable, Equatable {
    /// Answer the sender of the event.
    case reply(NotificationReply)
    /// A notification entered the center, new or replacing one with its identifier (N10).
    /// Carries the full content and its decision (N16).
    case deliver(DeliveredNotification)
    /// Play a sound now (S3, S4).
    case playSound(NotificationSoundPlayback)
    /// Tell subscribed watchers (bodies already hidden per N13).
    case emit(NotificationWatcherEvent)
    /// The app's badge is now `count` (N12).
    case badgeChanged(app: String, count: Int)
    /// Send an action response to the app, which is connected (N14).
    case sendToApp(app: String, NotificationActionResponse)
}

/// A reply to the sender of an event.
public enum NotificationReply: Codable, Sendable, Equatable {
    /// Authorization answer (N1): the status and the options it covers.
    case authorization(status: NotificationAuthorizationStatus, options: [NotificationAuthorizationOption])
    /// The request was accepted; the decision says delivered, held, silenced or downgraded.
    case accepted(identifier: String, decision: NotificationDecision)
    /// A standalone sound's decision (N17) and, when the rules let it play, the playback: the
    /// request's handler plays it and answers with what played (it is no `playSound` effect,
    /// which the engine would play a second time).
    case played(NotificationDecision, playback: NotificationSoundPlayback?)
    /// Done, nothing to report.
    case done
    /// A remote message id seen before (issue 11): nothing changed; the decision made the first
    /// time, if it is still in the decision log.
    case duplicate(identifier: String, decision: NotificationDecision?)
    /// Refused: stable code, message, and the decision if there was one (N16).
    case failed(code: NotificationErrorCode, message: String, decision: NotificationDecision?)
}

/// A sound for the engine to play (S3), with what it may bypass (N3) and that it ducks other audio
/// for its length (S4).
public struct NotificationSoundPlayback: Codable, Sendable, Equatable {
    /// App whose sound it is.
    public var app: String
    /// Notification identifier, nil for a standalone sound (N17).
    public var notificationIdentifier: String?
    /// Sound name (S2 lookup).
    public var name: String
    /// Linear volume 0…1.
    public var volume: Double
    /// Plays through ringer-silent, focus and a call (N3).
    public var bypassRingerAndFocus: Bool
    /// Unmute the output for the sound's length, then restore it (N3).
    public var unmuteOutput: Bool
    /// Duck other audio for the sound's length (S4); true for every sound that plays.
    public var duckOthers: Bool
    /// When the rules decided it (what the engine says back with ``NotificationEvent/soundNotPlayed(_:)``
    /// if it cannot play); nil for a playback made outside the policy.
    public var decidedAt: NotificationTime?
    /// The thread its N11 cooldown counted it in (nil: the app's threadless alerts).
    public var thread: String?

    /// Makes a playback.
    public init(app: String, notificationIdentifier: String?, name: String, volume: Double,
                bypassRingerAndFocus: Bool, unmuteOutput: Bool, duckOthers: Bool, decidedAt: NotificationTime? = nil,
                thread: String? = nil) {
        self.decidedAt = decidedAt
        self.thread = thread
        self.app = app
        self.notificationIdentifier = notificationIdentifier
        self.name = name
        self.volume = volume
        self.bypassRingerAndFocus = bypassRingerAndFocus
        self.unmuteOutput = unmuteOutput
        self.duckOthers = duckOthers
    }
}

/// A notification as watchers see it: the body is replaced by the placeholder when the app's
/// previews are `never` (N13).
public struct NotificationView: Codable, Sendable, Equatable {
    /// App id.
    public var app: String
    /// Identifier.
    public var identifier: String
    /// Title.
    public var title: String
    /// Subtitle.
    public var subtitle: String
    /// Body, or the category's placeholder (default "Notification") when previews are hidden.
    public var body: String
    /// Whether `body` is the placeholder.
    public var previewHidden: Bool
    /// Category id.
    public var categoryIdentifier: String?
    /// Thread id.
    public var threadIdentifier: String?
    /// Level it was delivered at.
    public var level: InterruptionLevel
    /// Relevance 0…1.
    public var relevanceScore: Double
    /// When it was delivered.
    public var deliveredAt: NotificationTime
    /// Whether it was delivered late (N15).
    public var late: Bool

    /// Makes a view.
    public init(app: String, identifier: String, title: String, subtitle: String, body: String, previewHidden: Bool,
                categoryIdentifier: String?, threadIdentifier: String?, level: InterruptionLevel,
                relevanceScore: Double, deliveredAt: NotificationTime, late: Bool) {
        self.app = app
        self.identifier = identifier
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.previewHidden = previewHidden
        self.categoryIdentifier = categoryIdentifier
        self.threadIdentifier = threadIdentifier
        self.level = level
        self.relevanceScore = relevanceScore
        self.deliveredAt = deliveredAt
        self.late = late
    }
}

/// Events for subscribed watchers (the CLI, status bars).
public enum NotificationWatcherEvent: Codable, Sendable, Equatable {
    /// A new notification is in the center.
    case delivered(NotificationView, NotificationDecision)
    /// A notification in the center was replaced (N10).
    case updated(NotificationView, NotificationDecision)
    /// Notifications left the center. `reason` is `"app"`, `"user"`, or the rule id that removed
    /// them (`"N11"` oldest dropped, `"N12"` badge 0, `"N14"` answered).
    case removed(app: String, identifiers: [String], reason: String)
    /// A decision that put nothing in the center: held (N8, N9, N11) or rejected (N1, N6, …) (N16).
    case decided(app: String, identifier: String, decision: NotificationDecision)
    /// The user answered an action (N14).
    case actionResponse(app: String, NotificationActionResponse)
    /// The focus in effect changed (N7): new focus (nil = none), the previous one, and whether the
    /// new one is manual.
    case focusChanged(focus: String?, previous: String?, manual: Bool)
    /// The scheduled summary was delivered (N9), in its order.
    case summaryDelivered([NotificationView])
    /// Sent once when a focus ends (N7): what it silenced.
    case missedDuringFocus(focus: String, missed: [NotificationMissedEntry])
    /// An app asked for authorization and the default policy is `prompt` (N1): the user answers
    /// with a settings change.
    case authorizationRequested(app: String, options: [NotificationAuthorizationOption])
    /// The user changed an app's settings (N2).
    case settingsChanged(app: String, NotificationAppSettings)
    /// The daemon forgot an app's record to make room for a new app's (``NotificationPolicyConfig/maxApps``):
    /// it held no choice of the user's and nothing waiting (``NotificationAppRecord/mayBeForgotten``).
    case appForgotten(app: String)
}
