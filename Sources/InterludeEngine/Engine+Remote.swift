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

    /// Decides one message from the broker and returns its receipt. When the status is not
    /// `failed`, the decision (and the message id) is saved: the caller acknowledges the message
    /// only after this returns. A `failed` receipt means nothing was saved (storage, N15): the
    /// caller must not acknowledge it (it retries), so the message comes again.
    ///
    /// A malformed or oversized message is logged and gets a `malformed` receipt; it changes no
    /// state and is never delivered.
    public func remoteMessage(_ payload: [UInt8]) async -> RemoteReceipt {
        let settings = remote ?? RemoteSettings(topics: RemoteTopics(prefix: "", device: ""), maxMessageBytes: RemoteMessage.defaultMaxBytes,
                                                dedupeWindow: 1000)
        let device = settings.topics.device
        let now = clock.wallTime
        let message: RemoteMessage
        do { message = try RemoteMessage.parse(payload, maxBytes: settings.maxMessageBytes) } catch {
            log("remote message \(error.id ?? "?") malformed: \(error.error) (acknowledged, not delivered)")
            return RemoteReceipt(id: error.id, device: device, app: error.app, identifier: nil, status: .malformed, rules: [],
                                 decision: nil, error: error.error, time: now)
        }
        let request: NotificationRequest
        do { request = try notificationRequest(message.notification) } catch {
            log("remote message \(message.id) malformed: \(error) (acknowledged, not delivered)")
            return RemoteReceipt(id: message.id, device: device, app: message.app, identifier: message.notification.identifier,
                                 status: .malformed, rules: [], decision: nil, error: error, time: now)
        }
        let receipt: RemoteReceipt
        do {
            // Durable before it returns (group commit, N15): only then may the broker be acknowledged.
            let reply = try await notifyDurably(.addRemote(request, app: message.app, messageID: message.id, dedupeWindow: settings.dedupeWindow))
            switch reply {
            case let .accepted(identifier, decision)?:
                receipt = RemoteReceipt(id: message.id, device: device, app: message.app, identifier: identifier,
                                        status: RemoteReceipt.status(of: decision.outcome), rules: decision.rules,
                                        decision: decision, error: nil, time: now)
            case let .failed(code, text, decision)?:
                receipt = RemoteReceipt(id: message.id, device: device, app: message.app, identifier: request.identifier,
                                        status: .rejected, rules: decision?.rules ?? [], decision: decision,
                                        error: WireError(WireErrorCode(rawValue: code.rawValue) ?? .badRequest, text), time: now)
            case let .duplicate(identifier, decision)?:
                receipt = RemoteReceipt(id: message.id, device: device, app: message.app, identifier: identifier, status: .duplicate,
                                        rules: decision?.rules ?? [], decision: decision, error: nil, time: now)
            default:
                receipt = RemoteReceipt(id: message.id, device: device, app: message.app, identifier: request.identifier, status: .failed,
                                        rules: [], decision: nil, error: WireError(.internalError, "the policy gave no reply"), time: now)
            }
        } catch {
            return RemoteReceipt(id: message.id, device: device, app: message.app, identifier: request.identifier, status: .failed,
                                 rules: [], decision: nil, error: error, time: now)
        }
        log("remote message \(message.id) for \(message.app)/\(receipt.identifier ?? "?"): \(receipt.status.rawValue) [\(receipt.rules.joined(separator: ","))]")
        return receipt
    }
}
