/// Remote notifications (issue 11): a provider's message, delivered by the broker, decided by the
/// same rules as a local request (N1–N17), once per message id.
extension NotificationPolicy {
    /// How a remote message is remembered in ``NotificationState/remoteMessages``: the app and the
    /// provider's message id (a unit separator between them), so each app's provider has ids of its own.
    public static func remoteMessageKey(app: String, messageID: String) -> String { app + "\u{1F}" + messageID }

    /// At most this many receipts are kept owed (``NotificationState/owedReceipts``): a broker that
    /// never acknowledges them must not grow the state without end. Ten backlogs of the default
    /// `remote.dedupeWindow` (1,000); over it the oldest go, and are then only in memory.
    public static let maxOwedReceipts = 10_000
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

extension NotificationReducer {
    /// See ``NotificationEvent/remoteReceiptsOwed(_:)``.
    mutating func oweReceipts(_ receipts: [OwedReceipt]) {
        state.owedReceipts += receipts
        let excess = state.owedReceipts.count - NotificationPolicy.maxOwedReceipts
        if excess > 0 { state.owedReceipts.removeFirst(excess) }
    }

    /// See ``NotificationEvent/remoteReceiptsAcknowledged(_:)``. Receipts are acknowledged about
    /// in the order they were owed, so each is looked for from where the last one was found.
    mutating func receiptsAcknowledged(_ receipts: [OwedReceipt]) {
        guard !receipts.isEmpty, !state.owedReceipts.isEmpty else { return }
        var gone = Set<Int>()
        var from = 0
        for r in receipts {
            let owed = state.owedReceipts
            let hit = (from..<owed.count).first { !gone.contains($0) && owed[$0] == r }
                ?? (0..<from).first { !gone.contains($0) && owed[$0] == r }
            if let hit { gone.insert(hit); from = hit + 1 }
        }
        if gone.isEmpty { return }
        state.owedReceipts = state.owedReceipts.enumerated().filter { !gone.contains($0.offset) }.map(\.element)
    }
}
