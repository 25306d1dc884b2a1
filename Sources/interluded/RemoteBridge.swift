import Dispatch
import Foundation
import InterludeConfig
import InterludeEngine
import InterludeRemote
import InterludeWire
import Synchronization

/// Remote notifications (issue 11): the broker (InterludeRemote) → the engine → a receipt back.
///
/// Each message is handled on libmosquitto's network thread, which waits here until the engine
/// has decided and saved it (N15); only then does the handler return and libmosquitto write the
/// PUBACK. A SIGKILL before the save: no PUBACK, the broker delivers the message again (persistent
/// session). A SIGKILL after the save and before the PUBACK: delivered again and recognized by its
/// id (`duplicate`), so it is never delivered twice. Written outside main.swift (the callback trap).
final class RemoteBridge: Sendable {
    let client: MQTTClient
    let engine: Engine
    let topics: RemoteTopics
    let log: @Sendable (String) -> Void

    /// Reads the `remote` config; nil when it names no broker.
    /// - Throws: a message for `bad config` (exit 78): a broker without a device id, a bad URL or
    ///   device id, a password file that cannot be read.
    static func make(config: InterludeConfig, engine: Engine, log: @escaping @Sendable (String) -> Void) async throws -> RemoteBridge? {
        guard let broker = config.string("remote.broker") else { return nil }
        let source = config.sources["remote"] ?? "the config"
        func bad(_ key: String, _ why: String) -> ConfigProblem { ConfigProblem(message: "\(source): key 'remote.\(key)': \(why) [configBadValue]") }
        let url: MQTTBrokerURL
        do { url = try MQTTBrokerURL(broker) } catch { throw bad("broker", error.message) }
        guard let device = config.string("remote.deviceId") else { throw bad("deviceId", "a broker needs this device's id") }
        if let why = RemoteTopics.deviceProblem(device) { throw bad("deviceId", why) }
        var password: String?
        if let file = config.string("remote.passwordFile") {
            do { password = try MQTTOptions.readPasswordFile(file) } catch { throw bad("passwordFile", error.message) }
        }
        let options = MQTTOptions(broker: url, clientID: device, cleanSession: false,
                                  username: config.string("remote.username") ?? device, password: password,
                                  caFile: config.string("remote.caFile"), keepaliveSeconds: Int32(config.number("remote.keepaliveSeconds")))
        let client: MQTTClient
        do { client = try MQTTClient(options, log: log) } catch { throw bad(error.code == .badCredentials ? "caFile" : "broker", error.message) }
        let topics = RemoteTopics(prefix: config.string("remote.topicPrefix") ?? "interlude/devices", device: device)
        await engine.setRemote(.init(topics: topics, maxMessageBytes: Int(config.number("remote.maxMessageBytes")),
                                     dedupeWindow: Int(config.number("remote.dedupeWindow"))))
        return RemoteBridge(client: client, engine: engine, topics: topics, log: log)
    }

    init(client: MQTTClient, engine: Engine, topics: RemoteTopics, log: @escaping @Sendable (String) -> Void) {
        self.client = client; self.engine = engine; self.topics = topics; self.log = log
    }

    /// Connects (retrying while the broker is away) and subscribes on every connection.
    func start() throws {
        let topics = self.topics
        try client.start(onMessage: { [self] m in self.handle(m) }, onConnect: { [client, log] in
            do { try client.subscribe(topics.notifications, qos: 1) } catch { log("cannot subscribe to \(topics.notifications): \(error)") }
        })
        log("remote notifications from \(client.options.broker) on \(topics.notifications)")
    }

    func stop() { client.stop() }

    /// On the network thread: decide and save, then publish the receipt; returning lets the PUBACK go.
    func handle(_ m: MQTTMessage) {
        var receipt = decide(m.payload)
        var wait = 0.1
        while receipt.status == .failed {
            // Not saved (N15): keep the message unacknowledged and try again; the broker keeps it.
            log("remote message \(receipt.id ?? "?") not saved (\(receipt.error?.message ?? "?")); trying again in \(wait) s")
            Thread.sleep(forTimeInterval: wait)
            wait = min(wait * 2, 5)
            receipt = decide(m.payload)
        }
        do { try client.publish(topics.receipts, receipt.encoded(), qos: 1) } catch {
            log("cannot publish the receipt of \(receipt.id ?? "?"): \(error)")
        }
    }

    /// Runs the engine's decision and waits for it (this is not a Swift concurrency thread).
    func decide(_ payload: [UInt8]) -> RemoteReceipt {
        let result = Mutex<RemoteReceipt?>(nil)
        let done = DispatchSemaphore(value: 0)
        let engine = self.engine
        Task {
            let r = await engine.remoteMessage(payload)
            result.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }
}

/// A config problem found after loading (printed as `bad config: …`, exit 78).
struct ConfigProblem: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
