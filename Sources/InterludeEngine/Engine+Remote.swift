import InterludePolicy
import InterludeWire

/// Remote notifications (issue 11, REMOTE.md): a provider's message from the broker becomes the
/// policy's `.addRemote` event, decided by the same rules as a local request (N1–N17) and saved
/// with its message id before this returns (N15), so the caller may acknowledge it to the broker
/// only then.
extension Engine {
    /// The broker side of this daemon, for `notification.registerRemote` replies (nil: no broker
    /// configured) and how messages are checked.
    public struct RemoteSettings: Sendable {
        public var topics: RemoteTopics
        /// Messages larger than this (bytes) are malformed (`remote.maxMessageBytes`).
        public var maxMessageBytes: Int
        /// How many recent message ids are remembered to recognize a message delivered again
        /// (`remote.dedupeWindow`).
        public var dedupeWindow: Int
        public init(topics: RemoteTopics, maxMessageBytes: Int, dedupeWindow: Int) {
            self.topics = topics; self.maxMessageBytes = maxMessageBytes; self.dedupeWindow = dedupeWindow
        }
    }

    /// Names the broker side (the daemon's composition root, when the config names a broker).
    public func setRemote(_ settings: RemoteSettings) { remote = settings }

    /// `notification.registerRemote`: the calling app registers (`enabled`, default true) or
    /// unregisters for remote notifications (N1). Whether they reach it is also the user's
    /// setting `remote` (N2).
    public func registerRemote(client: Int, _ p: RegisterRemoteParams) async throws(WireError) -> RegisterRemoteResult {
        let app = try appOf(client)
        let enabled = p.enabled ?? true
        _ = try expect(await notifyDurably(.registerRemote(app: app, enabled: enabled)))
        log("\(app) \(enabled ? "registered" : "unregistered") for remote notifications [N1]")
        return RegisterRemoteResult(registered: enabled, device: remote?.topics.device, topic: remote?.topics.notifications)
    }

    /// Decides one message from the broker and returns its receipt (``remoteMessages(_:)`` of one).
    public func remoteMessage(_ payload: [UInt8]) async -> RemoteReceipt {
        await remoteMessages([payload])[0]
    }

    /// ``decideRemoteMessages(_:)``'s receipts only.
    public func remoteMessages(_ payloads: [[UInt8]]) async -> [RemoteReceipt] {
        await decideRemoteMessages(payloads).map(\.receipt)
    }

    /// A remote message decided: its receipt, and unless the receipt is `failed` (nothing saved)
    /// the receipt as owed (``OwedReceipt``, saved with the decision): publish `owed.payload`, and
    /// once the broker has acknowledged it, hand it to ``remoteReceiptsAcknowledged(_:)``.
    public struct DecidedRemoteMessage: Sendable {
        public var receipt: RemoteReceipt
        public var owed: OwedReceipt?
    }

    /// The broker acknowledged these receipts (REMOTE.md "Receipts are owed until the broker has them"): they are no longer owed. Saved
    /// with the next commit (nobody waits for it; one lost to a crash is published once more
    /// after the restart, which a provider takes as the duplicate it is).
    public func remoteReceiptsAcknowledged(_ receipts: [OwedReceipt]) {
        guard !receipts.isEmpty else { return }
        let before = notifState
        _ = NotificationPolicy.reduce(&notifState, .remoteReceiptsAcknowledged(receipts), now: NotificationTime(clock.wallTime),
                                      config: notifConfig)
        guard let commit = try? submitState(since: before) else { return }
        settle(NotificationStep(commit: commit, effects: [], reply: nil), waiter: nil)
    }

    /// The receipts owed to providers, oldest first: after a start, those the last run decided and
    /// saved but the broker had not acknowledged (the daemon publishes them again).
    public func owedReceipts() -> [OwedReceipt] { notifState.owedReceipts }

    /// The owed form of a receipt: its text as published.
    static func owed(_ r: RemoteReceipt) -> OwedReceipt {
        OwedReceipt(app: r.app ?? "", messageID: r.id ?? "", time: r.time, payload: String(decoding: r.encoded(), as: UTF8.self))
    }

    /// Decides messages from the broker, in order, and returns their receipts (one per payload,
    /// in the same order) once they are saved, with the receipts owed (REMOTE.md "Receipts are owed until the broker has them": saved
    /// in the same transaction as the decisions, so that a receipt is not lost with the process
    /// between the commit and the broker's acknowledgement of it). Every message is decided by the policy in order,
    /// then the state is submitted to the store once for the batch, so a backlog drained after a
    /// reconnect pays one state diff and one commit per batch, not per message. When a receipt's status is
    /// not `failed`, its decision (and the message id) is saved: the caller acknowledges the
    /// message only after this returns. A `failed` receipt means it was not saved (storage, N15):
    /// the caller must not acknowledge it (it retries), so the message comes again.
    ///
    /// A malformed or oversized message is logged and gets a `malformed` receipt; it is never
    /// delivered, and of the state only its receipt, owed, changes.
    public func decideRemoteMessages(_ payloads: [[UInt8]]) async -> [DecidedRemoteMessage] {
        let settings = remote ?? RemoteSettings(topics: RemoteTopics(prefix: "", device: ""), maxMessageBytes: RemoteMessage.defaultMaxBytes,
                                                dedupeWindow: 1000)
        let device = settings.topics.device
        let now = clock.wallTime
        var receipts: [RemoteReceipt?] = Array(repeating: nil, count: payloads.count)
        var decided: [(index: Int, message: RemoteMessage, request: NotificationRequest, reply: NotificationReply?)] = []
        var effects: [NotificationEffect] = []
        let before = notifState
        // Decide each in order, without suspending (nothing else reaches the policy in between):
        // the same pure core as a local request, one event per message.
        for (i, payload) in payloads.enumerated() {
            let message: RemoteMessage
            do { message = try RemoteMessage.parse(payload, maxBytes: settings.maxMessageBytes) } catch {
                log("remote message \(error.id ?? "?") malformed: \(error.error) (acknowledged, not delivered)")
                receipts[i] = RemoteReceipt(id: error.id, device: device, app: error.app, identifier: nil, status: .malformed, rules: [],
                                            decision: nil, error: error.error, time: now)
                continue
            }
            let request: NotificationRequest
            do throws(WireError) {
                request = try notificationRequest(message.notification, now: now)
                // Out of range (badge -1, criticalVolume 7, a trigger that never fires): malformed, as
                // REMOTE.md says, so the id is not taken and a corrected message can use it.
                if let problem = NotificationPolicy.requestProblem(request, at: NotificationTime(now), config: notifConfig) {
                    throw WireError(.badRequest, problem.message)
                }
            } catch {
                log("remote message \(message.id) malformed: \(error) (acknowledged, not delivered)")
                receipts[i] = RemoteReceipt(id: message.id, device: device, app: message.app, identifier: message.notification.identifier,
                                            status: .malformed, rules: [], decision: nil, error: error, time: now)
                continue
            }
            let fx = NotificationPolicy.reduce(&notifState, .addRemote(request, app: message.app, messageID: message.id,
                                                                       dedupeWindow: settings.dedupeWindow),
                                               now: NotificationTime(now), config: notifConfig)
            effects += fx
            decided.append((i, message, request, fx.lazy.compactMap { if case let .reply(r) = $0 { r } else { nil } }.last))
        }
        // Every receipt is known now; they are owed from the transaction of their decisions on.
        for d in decided {
            receipts[d.index] = Self.receipt(of: d.reply, message: d.message, request: d.request, device: device, time: now)
        }
        let owed = receipts.map { $0.map(Self.owed) }
        let allOwed = owed.compactMap { $0 }
        if !allOwed.isEmpty {
            effects += NotificationPolicy.reduce(&notifState, .remoteReceiptsOwed(allOwed), now: NotificationTime(now), config: notifConfig)
        }
        // One submit for the batch: one diff of the state and one commit (the store's group
        // commit), not one per message. As `submitNotification`, for a batch.
        func notSaved(_ error: WireError) -> [DecidedRemoteMessage] {
            var failed = receipts
            for d in decided {
                failed[d.index] = RemoteReceipt(id: d.message.id, device: device, app: d.message.app, identifier: d.request.identifier,
                                                status: .failed, rules: [], decision: nil, error: error, time: now)
            }
            // Malformed ones were not saved either: they are published, not owed.
            return failed.map { DecidedRemoteMessage(receipt: $0!, owed: nil) }
        }
        let commit: NotificationCommit
        do { commit = try submitState(since: before) } catch { return notSaved(error) }
        if !decided.isEmpty { scheduleNotificationTick() }
        // The effects are carried out in order, once the state is durable, and only then do the
        // receipts say so (N15): only then may the broker be acknowledged. A failed commit: the
        // drain takes the store's durable state back (without this batch).
        let step = NotificationStep(commit: commit, effects: effects, reply: nil)
        do {
            _ = try await withCheckedThrowingContinuation { (c: CheckedContinuation<NotificationReply?, any Error>) in
                settle(step, waiter: .continuation(c))
            }
        } catch {
            return notSaved(WireError(.storageFailed, "the notification state cannot be saved: \(error)"))
        }
        for d in decided {
            let receipt = receipts[d.index]!
            logNotice("remote message \(d.message.id) for \(d.message.app)/\(receipt.identifier ?? "?"): \(receipt.status.rawValue) [\(receipt.rules.joined(separator: ","))]")
        }
        return zip(receipts, owed).map { DecidedRemoteMessage(receipt: $0!, owed: $1) }
    }

    /// The receipt of a saved decision (the policy's reply to `.addRemote`).
    static func receipt(of reply: NotificationReply?, message: RemoteMessage, request: NotificationRequest, device: String,
                        time now: Double) -> RemoteReceipt {
        switch reply {
        case let .accepted(identifier, decision)?:
            return RemoteReceipt(id: message.id, device: device, app: message.app, identifier: identifier,
                                 status: RemoteReceipt.status(of: decision.outcome), rules: decision.rules,
                                 decision: decision, error: nil, time: now)
        case let .failed(code, text, decision)?:
            return RemoteReceipt(id: message.id, device: device, app: message.app, identifier: request.identifier,
                                 status: .rejected, rules: decision?.rules ?? [], decision: decision,
                                 error: WireError(WireErrorCode(rawValue: code.rawValue) ?? .badRequest, text), time: now)
        case let .duplicate(identifier, decision)?:
            return RemoteReceipt(id: message.id, device: device, app: message.app, identifier: identifier, status: .duplicate,
                                 rules: decision?.rules ?? [], decision: decision, error: nil, time: now)
        default:
            return RemoteReceipt(id: message.id, device: device, app: message.app, identifier: request.identifier, status: .failed,
                                 rules: [], decision: nil, error: WireError(.internalError, "the policy gave no reply"), time: now)
        }
    }
}
