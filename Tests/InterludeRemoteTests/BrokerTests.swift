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
