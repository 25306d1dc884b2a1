import Foundation
import Testing
import InterludeConfig
import InterludeRemote
@testable import InterludeRemoteBridge

/// The `remote` config section as the daemon reads it at start and checks on a reload
/// (`RemoteBridge.settings`, REMOTE.md "Config"): what it gives the MQTT client, and each refusal
/// naming file, line and key (exit 78 at start). These ran only through a daemon's start before.
@Suite struct RemoteSettingsTests {
    final class Folder {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("interlude-remote-\(UUID().uuidString)").path
        init() throws { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        deinit { try? FileManager.default.removeItem(atPath: path) }
        /// Loads `text` as the only config file (every other key at its default).
        func config(_ text: String) throws -> InterludeConfig {
            try text.write(toFile: path + "/" + ConfigLoader.fileName, atomically: true, encoding: .utf8)
            return try ConfigLoader.load(folders: [path])
        }
        var file: String { path + "/" + ConfigLoader.fileName }
    }

    @Test func withoutABrokerThereIsNothingToConnect() throws {
        let f = try Folder()
        #expect(try RemoteBridge.settings(config: f.config("{}")) == nil)
        #expect(try RemoteBridge.settings(config: f.config("{ remote: { deviceId: 'kiosk-1' } }")) == nil)
    }

    @Test func aBrokerGivesTheClientItsOptionsAndTopics() throws {
        let f = try Folder()
        try "s3cret\n".write(toFile: f.path + "/password", atomically: true, encoding: .utf8)
        let text = """
        {
          remote: {
            broker: 'mqtt://broker.example:1884',
            fallbackBrokers: ['mqtt://b2.example', 'mqtt://b3.example:1999'],
            deviceId: 'kiosk-7',
            passwordFile: '\(f.path)/password',
            topicPrefix: 'fleet/eu',
            keepaliveSeconds: 45,
            dedupeWindow: 400,
          },
        }
        """
        guard let (options, topics) = try RemoteBridge.settings(config: f.config(text)) else { Issue.record("no settings"); return }
        #expect(options.broker.host == "broker.example" && options.broker.port == 1884 && !options.broker.tls)
        #expect(options.fallbackBrokers.map(\.description) == [try MQTTBrokerURL("mqtt://b2.example").description, try MQTTBrokerURL("mqtt://b3.example:1999").description])
        #expect(options.clientID == "kiosk-7" && options.username == "kiosk-7", "the username defaults to the device id")
        #expect(options.password == "s3cret")
        #expect(!options.cleanSession, "a persistent session: the broker keeps what comes while the device is away")
        #expect(options.keepaliveSeconds == 45)
        #expect(options.maxUnacknowledged == 100, "a quarter of the dedupe window")
        #expect(topics.notifications == "fleet/eu/kiosk-7/notifications" && topics.receipts == "fleet/eu/kiosk-7/receipts")
    }

    @Test func theUnacknowledgedRoundStaysWithin1To256() throws {
        let f = try Folder()
        let small = try RemoteBridge.settings(config: f.config("{ remote: { broker: 'mqtt://h', deviceId: 'd', dedupeWindow: 16 } }"))
        #expect(small?.0.maxUnacknowledged == 4)
        let large = try RemoteBridge.settings(config: f.config("{ remote: { broker: 'mqtt://h', deviceId: 'd', dedupeWindow: 100000 } }"))
        #expect(large?.0.maxUnacknowledged == 256)
    }

    @Test("each refusal names the file, the line and the key", arguments: [
        // (the remote section's lines, the key named, the line named (1-based in the file), words of the reason)
        ("    broker: 'mqtt://h',", "deviceId", 3, "a broker needs this device's id"),
        ("    broker: 'http://h',\n    deviceId: 'd',", "broker", 3, "mqtt"),
        ("    broker: 'mqtt://h',\n    deviceId: 'a/b',", "deviceId", 4, "/"),
        ("    broker: 'mqtts://h',\n    fallbackBrokers: ['mqtt://h2'],\n    deviceId: 'd',", "fallbackBrokers[0]", 4, "must both be mqtt:// or both mqtts://"),
        ("    broker: 'mqtt://h',\n    fallbackBrokers: ['mqtt://h2', 'ftp://x'],\n    deviceId: 'd',", "fallbackBrokers[1]", 4, "not ftp://x"),
        ("    broker: 'mqtt://h',\n    deviceId: 'd',\n    passwordFile: '/nonexistent/pw',", "passwordFile", 5, "/nonexistent/pw"),
        ("    broker: 'mqtts://h',\n    deviceId: 'd',\n    caFile: '/nonexistent/ca.pem',", "caFile", 5, "cannot read the CA file /nonexistent/ca.pem"),
        ("    caFile: '/tmp',", "caFile", 3, "is not a file"),
    ])
    func refusals(section: String, key: String, line: Int, says: String) throws {
        let f = try Folder()
        let config = try f.config("{\n  remote: {\n\(section)\n  },\n}")
        do { _ = try RemoteBridge.settings(config: config); Issue.record("accepted: \(section)") } catch {
            #expect(error.message.hasPrefix("\(f.file):\(line): key 'remote.\(key)': "), "\(error.message)")
            #expect(error.message.contains(says) && error.message.hasSuffix("[configBadValue]"), "\(error.message)")
        }
    }

    @Test func anEmptyCAFileIsRefusedBeforeAnyHandshake() throws {
        let f = try Folder()
        FileManager.default.createFile(atPath: f.path + "/ca.pem", contents: Data())
        #expect(RemoteBridge.caFileProblem(f.path + "/ca.pem") == "the CA file \(f.path)/ca.pem is empty")
        try "-----BEGIN CERTIFICATE-----\n".write(toFile: f.path + "/ca.pem", atomically: true, encoding: .utf8)
        #expect(RemoteBridge.caFileProblem(f.path + "/ca.pem") == nil, "its PEM content is OpenSSL's to judge")
    }
}

/// The hand-over from the network thread to the one worker task (``BatchInbox``): the first item
/// starts the worker, later ones join it; batches keep the order; the worker stops when a take
/// finds nothing, and the next item starts it again.
@Suite struct BatchInboxTests {
    @Test func theFirstItemStartsTheWorkerAndBatchesKeepTheOrder() {
        let inbox = BatchInbox<Int>()
        #expect(inbox.add(1), "no worker runs: start one")
        #expect(!inbox.add(2) && !inbox.add(3) && !inbox.add(4), "the worker runs: it will take them")
        #expect(inbox.take(atMost: 3) == [1, 2, 3])
        #expect(inbox.take(atMost: 3) == [4])
        #expect(inbox.take(atMost: 3) == nil, "empty: the worker stops")
        #expect(inbox.add(5), "stopped: the next item starts a worker again")
        #expect(inbox.take(atMost: .max) == [5])
    }

    @Test func itemsFromManyThreadsAreTakenOnceEach() async {
        let inbox = BatchInbox<Int>()
        let starts = await withTaskGroup(of: Int.self) { group in
            for t in 0..<8 {
                group.addTask { (0..<1000).reduce(0) { n, i in n + (inbox.add(t * 1000 + i) ? 1 : 0) } }
            }
            return await group.reduce(0, +)
        }
        #expect(starts == 1, "one worker for all, as long as none took everything")
        var taken: [Int] = []
        while let batch = inbox.take(atMost: 300) { taken += batch }
        #expect(taken.sorted() == Array(0..<8000))
    }
}
