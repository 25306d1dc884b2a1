/// Remote notifications (issue 11): a provider's message, delivered by the broker, decided by the
/// same rules as a local request (N1–N17), once per message id.
extension NotificationPolicy {
    /// How a remote message is remembered in ``NotificationState/remoteMessages``: the app and the
    /// provider's message id (a unit separator between them), so each app's provider has ids of its own.
    public static func remoteMessageKey(app: String, messageID: String) -> String { app + "\u{1F}" + messageID }
}

extension NotificationReducer {
    /// See ``NotificationEvent/addRemote(_:app:messageID:dedupeWindow:)``.
    mutating func addRemote(_ request: NotificationRequest, app: String, messageID: String, dedupeWindow: Int,
                            at now: NotificationTime) {
        let id = request.identifier
        // An id is the provider's: two apps' providers may both use "1", "2", … (a stranger's
        // find: the second app's message was answered `duplicate` and never delivered). Kept per
        // app; a bare id is one remembered before this change (recognized for any app until it
        // leaves the window).
        let key = NotificationPolicy.remoteMessageKey(app: app, messageID: messageID)
        if state.remoteMessages.contains(key) || state.remoteMessages.contains(messageID) {
            let first = state.decisionLog.last(where: { $0.app == app && $0.identifier == id })?.decision
            effects.append(.reply(.duplicate(identifier: id, decision: first)))
            return
        }
        state.remoteMessages.append(key)
        let excess = state.remoteMessages.count - max(1, dedupeWindow)
        if excess > 0 { state.remoteMessages.removeFirst(excess) }
        let record = state.apps[app] ?? NotificationAppRecord()
        let level = request.content.interruptionLevel
        guard record.remoteRegistered == true else {
            _ = reject(.notAuthorized, app: app, identifier: id, level: level, rule: "N1",
                       "the app has not registered for remote notifications", at: now)
            return
        }
        guard record.settings.remote == true else {
            _ = reject(.notAuthorized, app: app, identifier: id, level: level, rule: "N2",
                       "remote notifications are off for this app in the user's settings (interlude settings APP remote=on)", at: now)
            return
        }
        add(request, app: app, peerPath: nil, at: now)
    }
}
