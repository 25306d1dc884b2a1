import Foundation
import Synchronization
import Testing
@testable import InterludeRemote

/// The adapter against the private mosquitto of Scripts/test (INTERLUDE_TEST_MQTT_URL/_DIR).
@Suite(.serialized) struct BrokerTests {
    static let env = ProcessInfo.processInfo.environment
    static func available() -> Bool {
        if env["INTERLUDE_TEST_MQTT_URL"] != nil, env["INTERLUDE_TEST_MQTT_DIR"] != nil { return true }
        if env["CI"] == "true" { Issue.record("no test broker: run under Scripts/test or eval \"$(Scripts/mosquitto-private start DIR)\"") }
        return false
    }
    static func options(_ user: String, id: String, clean: Bool) throws -> MQTTOptions {
        MQTTOptions(broker: try MQTTBrokerURL(env["INTERLUDE_TEST_MQTT_URL"]!), clientID: id, cleanSession: clean, username: user,
                    password: try MQTTOptions.readPasswordFile(env["INTERLUDE_TEST_MQTT_DIR"]! + "/\(user).password"))
    }
    final class Inbox: Sendable { let got = Mutex<[String]>([]) }

    /// QoS 1 with a persistent session: what is published while the client is away arrives,
    /// in order, when it connects again.
    @Test(.enabled(if: available()))
    func aPersistentSessionGetsWhatWasPublishedWhileAway() throws {
        let topic = "interlude/devices/device-7/notifications"
        let device = try MQTTClient(Self.options("device-7", id: "device-7", clean: false))
        try device.start()
        try device.waitUntilConnected(timeout: 5)
        #expect(try device.waitForSubscription(device.subscribe(topic), timeout: 5) == [1])
        device.stop()

        let provider = try MQTTClient(Self.options("provider", id: "bt-provider-\(getpid())", clean: true))
        try provider.start()
        defer { provider.stop() }
        try provider.waitUntilConnected(timeout: 5)
        let tag = "\(getpid())-\(Int(Date().timeIntervalSince1970))"
        var mids: Set<Int32> = []
        for i in 0..<100 { mids.insert(try provider.publish(topic, Array("\(tag) \(i)".utf8))) }
        #expect(provider.waitForPublished(mids, timeout: 10).count == 100)

        let inbox = Inbox()
        let again = try MQTTClient(Self.options("device-7", id: "device-7", clean: false))
        try again.start(onMessage: { m in inbox.got.withLock { $0.append(String(decoding: m.payload, as: UTF8.self)) } })
        defer { again.stop() }
        try again.waitUntilConnected(timeout: 5)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, inbox.got.withLock({ $0.filter { $0.hasPrefix(tag) }.count }) < 100 { usleep(10000) }
        #expect(inbox.got.withLock { $0.filter { $0.hasPrefix(tag) } } == (0..<100).map { "\(tag) \($0)" })
    }

    /// Queued replies report the broker's acknowledgement (REMOTE.md "Receipts are owed until the
    /// broker has them"): each callback runs once, after its reply reached the broker, and the
    /// provider has every reply by then.
    @Test(.enabled(if: available()))
    func aQueuedReplySaysWhenTheBrokerHasIt() throws {
        let tag = "ack-\(getpid())"
        let receipts = "interlude/devices/device-11/receipts"
        let provider = try MQTTClient(Self.options("provider", id: "bt-acks-\(getpid())", clean: true))
        let got = Inbox()
        try provider.start(onMessage: { m in got.got.withLock { $0.append(String(decoding: m.payload, as: UTF8.self)) } })
        defer { provider.stop() }
        try provider.waitUntilConnected(timeout: 5)
        _ = try provider.waitForSubscription(provider.subscribe(receipts), timeout: 5)

        let device = try MQTTClient(Self.options("device-11", id: "device-11-\(getpid())", clean: true))
        try device.start()
        defer { device.stop() }
        try device.waitUntilConnected(timeout: 5)
        let acknowledged = Inbox()
        let n = 50  // more than `maxQueuedReplies` in flight at once
        for i in 0..<n {
            device.publishQueued(receipts, Array("\(tag) \(i)".utf8)) { acknowledged.got.withLock { $0.append("\(i)") } }
        }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, acknowledged.got.withLock({ $0.count }) < n { usleep(10000) }
        #expect(Set(acknowledged.got.withLock { $0 }) == Set((0..<n).map { "\($0)" }))
        #expect(acknowledged.got.withLock { $0.count } == n, "each callback once")
        usleep(200_000)
        #expect(got.got.withLock { $0.filter { $0.hasPrefix(tag) } } == (0..<n).map { "\(tag) \($0)" })
    }

    /// A device that answers each message at once (as the daemon publishes a receipt right after
    /// the PUBACK): the provider's round trip stays in milliseconds. With Nagle's algorithm on the
    /// device's socket, the answer waited for the broker's delayed ACK: about 40 ms every time.
    @Test(.enabled(if: available()))
    func anAnswerAfterThePubackIsNotHeldBack() throws {
        let tag = "rt-\(getpid())"
        let notifications = "interlude/devices/device-9/notifications", receipts = "interlude/devices/device-9/receipts"
        let device = try MQTTClient(Self.options("device-9", id: "device-9-\(getpid())", clean: true))
        let answered = Inbox()
        try device.start(onMessage: { [device] m in _ = try? device.publish(receipts, m.payload) })
        defer { device.stop() }
        try device.waitUntilConnected(timeout: 5)
        _ = try device.waitForSubscription(device.subscribe(notifications), timeout: 5)
        let provider = try MQTTClient(Self.options("provider", id: "rt-provider-\(getpid())", clean: true))
        try provider.start(onMessage: { m in answered.got.withLock { $0.append(String(decoding: m.payload, as: UTF8.self)) } })
        defer { provider.stop() }
        try provider.waitUntilConnected(timeout: 5)
        _ = try provider.waitForSubscription(provider.subscribe(receipts), timeout: 5)
        var times: [Double] = []
        for i in 0..<15 {
            let text = "\(tag) \(i)"
            let t0 = Date()
            _ = try provider.publish(notifications, Array(text.utf8))
            while Date().timeIntervalSince(t0) < 2, !answered.got.withLock({ $0.contains(text) }) { usleep(200) }
            times.append(Date().timeIntervalSince(t0))
            usleep(20000)
        }
        let median = times.sorted()[times.count / 2]
        print("publish → answer through the broker: median \(String(format: "%.1f", median * 1000)) ms")
        #expect(median < 0.025, "median \(median * 1000) ms")
    }

    /// `fallbackBrokers`: with its first broker unreachable (a port nobody listens on, then a host
    /// that does not resolve), the client moves on down the list, connects to the test broker,
    /// and gets a message through it; it says which broker it is on.
    @Test(.enabled(if: available()))
    func anUnreachableBrokerIsLeftForTheNextInTheList() throws {
        let real = try MQTTBrokerURL(Self.env["INTERLUDE_TEST_MQTT_URL"]!)
        var o = try Self.options("device-6", id: "device-6-\(getpid())", clean: true)
        o.broker = try MQTTBrokerURL("mqtt://127.0.0.1:1")
        o.fallbackBrokers = [try MQTTBrokerURL("mqtt://no-such-host.invalid:1883"), real]
        let lines = Inbox()
        let inbox = Inbox()
        let device = try MQTTClient(o, log: { line in lines.got.withLock { $0.append(line) } })
        try device.start(onMessage: { m in inbox.got.withLock { $0.append(String(decoding: m.payload, as: UTF8.self)) } })
        defer { device.stop() }
        try device.waitUntilConnected(timeout: 15)
        #expect(device.currentBroker == real)
        let topic = "interlude/devices/device-6/notifications"
        #expect(try device.waitForSubscription(device.subscribe(topic), timeout: 5) == [1])
        let provider = try MQTTClient(Self.options("provider", id: "bt-fallback-\(getpid())", clean: true))
        try provider.start()
        defer { provider.stop() }
        try provider.waitUntilConnected(timeout: 5)
        _ = provider.waitForPublished([try provider.publish(topic, Array("via the fallback".utf8))], timeout: 5)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, inbox.got.withLock({ $0.isEmpty }) { usleep(10000) }
        #expect(inbox.got.withLock { $0 } == ["via the fallback"])
        let log = lines.got.withLock { $0 }
        #expect(log.contains { $0.contains("cannot connect to mqtt://127.0.0.1:1") }, "\(log)")
        #expect(log.contains { $0.contains("trying the next broker, \(real)") } && log.contains { $0.contains("connected to \(real)") }, "\(log)")
    }

    @Test(.enabled(if: available()))
    func aWrongPasswordIsRefusedWithTheBrokersReason() throws {
        var o = try Self.options("device-8", id: "device-8-\(getpid())", clean: true)
        o.password = "wrong"
        let c = try MQTTClient(o)
        try c.start()
        defer { c.stop() }
        #expect(throws: MQTTError.self) { try c.waitUntilConnected(timeout: 5) }
    }

    /// Exactly once across a crash needs the PUBACKs of saved messages to reach the broker while
    /// a backlog is still being read (MQTTOptions.maxUnacknowledged): mosquitto sends a queued
    /// backlog all at once, and a client that wrote nothing while a message waited for its
    /// acknowledgement wrote no PUBACK until the whole backlog was read — a crash then had the
    /// broker deliver again everything saved so far (RemoteEndToEndTests' SIGKILL test: 1281 of
    /// 3000, more than the receiver's dedupe window). Here a second client with the same id takes
    /// the session over in the middle of a drain (the first one's unwritten PUBACKs die with its
    /// connection, as in a crash); of what the first had acknowledged by then, the broker
    /// delivers again at most one round (maxUnacknowledged, plus what one read can add).
    @Test(.enabled(if: available()))
    func aBacklogIsAcknowledgedToTheBrokerInRoundsWhileItDrains() throws {
        let topic = "interlude/devices/device-15/notifications"
        let id = "device-15"
        let first = try MQTTClient(Self.options("device-15", id: id, clean: false))
        try first.start()
        try first.waitUntilConnected(timeout: 5)
        #expect(try first.waitForSubscription(first.subscribe(topic), timeout: 5) == [1])
        first.stop()
        // Leftovers of an earlier run of this test (a persistent session) are drained first.
        let leftovers = try MQTTClient(Self.options("device-15", id: id, clean: false))
        try leftovers.start(onMessage: { _ in })
        try leftovers.waitUntilConnected(timeout: 5)
        usleep(500_000)
        leftovers.stop()

        let provider = try MQTTClient(Self.options("provider", id: "bt-rounds-\(getpid())", clean: true))
        try provider.start()
        defer { provider.stop() }
        try provider.waitUntilConnected(timeout: 5)
        let total = 2000
        var mids: Set<Int32> = []
        for i in 0..<total { mids.insert(try provider.publish(topic, Array("\(i)".utf8))) }
        #expect(provider.waitForPublished(mids, timeout: 20).count == total)

        // The drain: each message is acknowledged a little later on another thread, as the
        // daemon does once a batch is saved.
        let acknowledged = Mutex<[Int]>([])
        let saver = DispatchQueue(label: "saver")
        var o = try Self.options("device-15", id: id, clean: false)
        o.maxUnacknowledged = 64
        let draining = try MQTTClient(o)
        try draining.start(onDeferredMessage: { m, delivery in
            let n = Int(String(decoding: m.payload, as: UTF8.self)) ?? -1
            saver.async {
                usleep(300)
                acknowledged.withLock { $0.append(n) }
                delivery.acknowledge()
            }
        })
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, acknowledged.withLock({ $0.count }) < total / 3 { usleep(1000) }
        let acknowledgedBefore = Set(acknowledged.withLock { $0 })
        #expect(acknowledgedBefore.count >= total / 3 && acknowledgedBefore.count < total, "the drain did not get going or ended too soon")

        // The takeover: the broker ends the first connection and delivers what was not PUBACKed.
        let again = Inbox()
        let takeover = try MQTTClient(Self.options("device-15", id: id, clean: false))
        try takeover.start(onMessage: { m in again.got.withLock { $0.append(String(decoding: m.payload, as: UTF8.self)) } })
        defer { takeover.stop() }
        try takeover.waitUntilConnected(timeout: 5)
        draining.stop()
        let end = Date().addingTimeInterval(20)
        while Date() < end, !again.got.withLock({ $0.contains("\(total - 1)") }) { usleep(10000) }
        let redelivered = Set(again.got.withLock { $0 }.compactMap { Int($0) })
        let acknowledgedAll = Set(acknowledged.withLock { $0 })
        let twice = redelivered.intersection(acknowledgedBefore)
        let bound = o.maxUnacknowledged + MQTTClient.maxQueuedReplies + 1
        print("drain taken over after \(acknowledgedBefore.count) of \(total) acknowledged: \(redelivered.count) delivered again, \(twice.count) of them acknowledged before (bound \(bound))")
        #expect(acknowledgedAll.union(redelivered) == Set(0..<total), "a message was lost")
        #expect(twice.count <= bound, "\(twice.count) acknowledged messages were delivered again (PUBACKs held back)")
    }

    @Test func passwordFilesGiveTheirFirstLine() throws {
        let path = NSTemporaryDirectory() + "pw-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "s3cret\r\nsecond line\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try MQTTOptions.readPasswordFile(path) == "s3cret")
        try "\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: MQTTError.self) { try MQTTOptions.readPasswordFile(path) }
        #expect(throws: MQTTError.self) { try MQTTOptions.readPasswordFile("/nonexistent/pw") }
    }
}
