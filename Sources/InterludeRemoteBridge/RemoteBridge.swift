import Dispatch
import Foundation
import InterludeConfig
import InterludeEngine
import InterludePolicy
import InterludeRemote
import InterludeWire
import Synchronization

/// Remote notifications (issue 11): the broker (InterludeRemote) → the engine → a receipt back.
///
/// The network thread hands each message over and goes on reading; one worker task gives the
/// messages to the engine in order, in batches of what has come meanwhile (so one group commit
/// saves a batch, not one message), publishes their receipts and acknowledges them once the
/// engine has decided and saved them (N15). The client writes no PUBACK while any message handed
/// out is unacknowledged (``MQTTDelivery``). A SIGKILL before the save: no PUBACK, the broker
/// delivers the message again (persistent session). A SIGKILL after the save and before the
/// PUBACK: delivered again and recognized by its id (`duplicate`), so it is never delivered
/// twice. Receipts are owed in the engine's state from the decision's commit until the broker
/// acknowledges them, and the ones a start finds owed are published again (REMOTE.md "Receipts are owed until the broker has them").
/// A library target of its own (it was in `interluded`), so that its config reading and batching
/// are tested without starting a daemon (`InterludeRemoteBridgeTests`); the live path is tested end
/// to end (`RemoteEndToEndTests`).
public final class RemoteBridge: Sendable {
    let client: MQTTClient
    let engine: Engine
    let topics: RemoteTopics
    let log: @Sendable (String) -> Void
    /// Messages handed over and not yet taken by the worker, and whether it runs.
    let inbox = BatchInbox<(MQTTMessage, MQTTDelivery)>()
    /// Receipts the broker acknowledged, not yet given to the engine; `working`: a task gives them.
    let acknowledgedReceipts = BatchInbox<OwedReceipt>()
    /// At most this many messages go to the engine at once.
    static let maxBatch = 256

    /// Reads the `remote` config; nil when it names no broker.
    /// - Throws: a message for `bad config` (exit 78), see ``settings(config:)``.
    public static func make(config: InterludeConfig, engine: Engine, log: @escaping @Sendable (String) -> Void) async throws -> RemoteBridge? {
        guard let (options, topics) = try settings(config: config) else { return nil }
        let client: MQTTClient
        do { client = try MQTTClient(options, log: log) } catch {
            let key = error.code == .badCredentials ? "caFile" : "broker"   // a CA file, or libmosquitto itself
            let (file, line) = config.place(of: "remote.\(key)")
            throw RemoteConfigProblem(message: "\(file):\(line): key 'remote.\(key)': \(error.message) [configBadValue]")
        }
        await engine.setRemote(.init(topics: topics, maxMessageBytes: Int(config.number("remote.maxMessageBytes")),
                                     dedupeWindow: Int(config.number("remote.dedupeWindow"))))
        return RemoteBridge(client: client, engine: engine, topics: topics, log: log)
    }

    /// The client options and topics the `remote` section gives, checked without connecting: at
    /// start, and on a reload (the section is read at start only, but a reload that takes a
    /// section the next start would refuse left no daemon after that start). Nil when it names no
    /// broker.
    /// - Throws: ``RemoteConfigProblem`` naming file, line and key: a broker without a device id, a bad
    ///   URL, device id or topic prefix (MQTT wildcards `+` `#`, an empty level), a password or CA
    ///   file that cannot be read.
    public static func settings(config: InterludeConfig) throws(RemoteConfigProblem) -> (MQTTOptions, RemoteTopics)? {
        /// `at`: the key whose place is named (a missing key's is where the broker was set).
        func bad(_ key: String, _ why: String, at: String? = nil) -> RemoteConfigProblem {
            let (file, line) = config.place(of: "remote.\(at ?? key)")
            return RemoteConfigProblem(message: "\(file):\(line): key 'remote.\(key)': \(why) [configBadValue]")
        }
        guard let broker = config.string("remote.broker") else {
            // Without a broker nothing of it is used; a CA file or a topic prefix named anyway
            // must still be right (the user finds out now, not when the broker is added).
            if let ca = config.string("remote.caFile"), let why = caFileProblem(ca) { throw bad("caFile", why) }
            if let prefix = config.string("remote.topicPrefix"), let why = RemoteTopics.prefixProblem(prefix) { throw bad("topicPrefix", why) }
            return nil
        }
        let url: MQTTBrokerURL
        do { url = try MQTTBrokerURL(broker) } catch { throw bad("broker", error.message) }
        var fallbacks: [MQTTBrokerURL] = []
        for (i, text) in config.strings("remote.fallbackBrokers").enumerated() {
            // Named by its index, as other lists' items are (the line is the list's).
            let other: MQTTBrokerURL
            do { other = try MQTTBrokerURL(text) } catch { throw bad("fallbackBrokers[\(i)]", error.message, at: "fallbackBrokers") }
            guard other.tls == url.tls else {
                throw bad("fallbackBrokers[\(i)]", "\(text) and the broker \(broker) must both be mqtt:// or both mqtts:// (one TLS setting serves all)",
                          at: "fallbackBrokers")
            }
            fallbacks.append(other)
        }
        guard let device = config.string("remote.deviceId") else { throw bad("deviceId", "a broker needs this device's id", at: "broker") }
        if let why = RemoteTopics.deviceProblem(device) { throw bad("deviceId", why) }
        var password: String?
        if let file = config.string("remote.passwordFile") {
            do { password = try MQTTOptions.readPasswordFile(file) } catch { throw bad("passwordFile", error.message) }
        }
        var options = MQTTOptions(broker: url, clientID: device, cleanSession: false,
                                  username: config.string("remote.username") ?? device, password: password,
                                  caFile: config.string("remote.caFile"), keepaliveSeconds: Int32(config.number("remote.keepaliveSeconds")))
        options.fallbackBrokers = fallbacks
        if let ca = options.caFile, let why = caFileProblem(ca) { throw bad("caFile", why) }
        let prefix = config.string("remote.topicPrefix") ?? "interlude/devices"
        if let why = RemoteTopics.prefixProblem(prefix) { throw bad("topicPrefix", why) }
        // What a crash can have the broker deliver again must stay inside the dedupe window, with
        // room (a round more can be lost in flight). Rounds of 64 cost a third of the drain's
        // throughput (4,500–5,100 msg/s against 6,500–7,700 before, same runs); rounds of 250 none.
        options.maxUnacknowledged = max(1, min(256, Int(config.number("remote.dedupeWindow")) / 4))
        return (options, RemoteTopics(prefix: prefix, device: device))
    }

    /// Why `path` cannot be a CA file, or nil: it must be a readable, non-empty regular file (a
    /// folder or an empty file passed the readability check and only failed each TLS handshake,
    /// logged once, while the daemon ran without remote notifications). Its PEM content is
    /// OpenSSL's to judge, at the handshake.
    static func caFileProblem(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0, FileManager.default.isReadableFile(atPath: path) else { return "cannot read the CA file \(path)" }
        guard st.st_mode & S_IFMT == S_IFREG else { return "the CA file \(path) is not a file" }
        guard st.st_size > 0 else { return "the CA file \(path) is empty" }
        return nil
    }

    init(client: MQTTClient, engine: Engine, topics: RemoteTopics, log: @escaping @Sendable (String) -> Void) {
        self.client = client; self.engine = engine; self.topics = topics; self.log = log
    }

    /// Connects (retrying while the broker is away) and subscribes on every connection. The
    /// receipts the last run owed (saved with their decisions, not acknowledged by the broker
    /// before it ended) go out first, in order, once connected.
    public func start() async throws {
        let owed = await engine.owedReceipts()
        for r in owed { publish(r) }
        if !owed.isEmpty { log("publishing again \(owed.count) receipt(s) the broker had not acknowledged before the last stop") }
        let topics = self.topics
        try client.start(onDeferredMessage: { [self] m, delivery in self.handle(m, delivery) }, onConnect: { [client, log] in
            do { try client.subscribe(topics.notifications, qos: 1) } catch { log("cannot subscribe to \(topics.notifications): \(error)") }
        })
        log("remote notifications from \(client.options.broker)"
            + (client.options.fallbackBrokers.isEmpty ? "" : " (else \(client.options.fallbackBrokers.map(\.description).joined(separator: ", ")))")
            + " on \(topics.notifications)")
    }

    public func stop() { client.stop() }

    /// On the network thread: hands the message to the worker (started if it does not run).
    func handle(_ m: MQTTMessage, _ delivery: MQTTDelivery) {
        if inbox.add((m, delivery)) { Task { await self.work() } }
    }

    /// The worker: batch after batch, in order, until the inbox is empty.
    func work() async {
        while let batch = inbox.take(atMost: Self.maxBatch) { await decide(batch) }
    }

    /// Decides and saves a batch, publishes each receipt and acknowledges each message; what was
    /// not saved (storage, N15) stays unacknowledged and is tried again with backoff.
    func decide(_ batch: [(MQTTMessage, MQTTDelivery)]) async {
        var todo = batch
        var wait = 0.1
        while true {
            let outcomes = await engine.decideRemoteMessages(todo.map { $0.0.payload })
            let receipts = outcomes.map(\.receipt)
            var again: [(MQTTMessage, MQTTDelivery)] = []
            for (item, decided) in zip(todo, outcomes) {
                let receipt = decided.receipt
                if receipt.status == .failed {
                    again.append(item)
                    continue
                }
                if let owed = decided.owed { publish(owed) } else { client.publishQueued(topics.receipts, receipt.encoded()) }
                item.1.acknowledge()
            }
            if again.isEmpty { return }
            // Not saved (N15): keep them unacknowledged and try again; the broker keeps them.
            let first = zip(todo, receipts).first { $0.1.status == .failed }?.1
            log("\(again.count) remote message(s) not saved (\(first?.error?.message ?? "?")); trying again in \(wait) s")
            try? await Task.sleep(nanoseconds: UInt64(wait * 1e9))
            wait = min(wait * 2, 5)
            todo = again
        }
    }
}

extension RemoteBridge {
    /// Publishes an owed receipt; once the broker acknowledges it, it is no longer owed.
    func publish(_ owed: OwedReceipt) {
        client.publishQueued(topics.receipts, Array(owed.payload.utf8)) { [self] in acknowledged(owed) }
    }

    /// On the network thread: keeps the receipt for the engine (a task gives what has gathered
    /// to it, in one event, so a drain's thousands of acknowledgements are a few engine jobs).
    func acknowledged(_ owed: OwedReceipt) {
        if acknowledgedReceipts.add(owed) { Task { await self.handAcknowledgedReceipts() } }
    }

    func handAcknowledgedReceipts() async {
        while let batch = acknowledgedReceipts.take(atMost: .max) { await engine.remoteReceiptsAcknowledged(batch) }
    }
}

/// Items handed over from the network thread to one worker task, taken in batches of what has
/// gathered meanwhile, in order. ``add(_:)`` says when the caller must start the worker (none
/// runs); ``take(atMost:)`` gives nil, and marks the worker stopped, when nothing is left.
final class BatchInbox<Item: Sendable>: Sendable {
    private let box = Mutex<(items: [Item], working: Bool)>(([], false))

    /// Adds an item; true when no worker runs and the caller must start one.
    func add(_ item: Item) -> Bool {
        box.withLock { b in
            b.items.append(item)
            if b.working { return false }
            b.working = true
            return true
        }
    }

    /// The next batch (the oldest `atMost` items), or nil when empty: the worker stops then.
    func take(atMost limit: Int) -> [Item]? {
        box.withLock { b in
            if b.items.isEmpty { b.working = false; return nil }
            let batch = Array(b.items.prefix(limit))
            b.items.removeFirst(batch.count)
            return batch
        }
    }
}

/// A `remote` config problem found after loading, as one line: `FILE:LINE: key 'remote.KEY': why
/// [configBadValue]` (`interluded` prints it as `bad config: …` and exits 78).
public struct RemoteConfigProblem: Error, CustomStringConvertible, Equatable {
    public var message: String
    public var description: String { message }
    public init(message: String) { self.message = message }
}
