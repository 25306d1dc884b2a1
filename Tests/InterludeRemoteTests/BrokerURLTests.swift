import Testing
@testable import InterludeRemote

/// Broker URLs: schemes, default ports, and what is refused (credentials never in a URL).
@Suite struct BrokerURLTests {
    @Test func schemesAndPorts() throws {
        #expect(try MQTTBrokerURL("mqtt://127.0.0.1") == MQTTBrokerURL(host: "127.0.0.1", port: 1883, tls: false))
        #expect(try MQTTBrokerURL("mqtts://broker.example") == MQTTBrokerURL(host: "broker.example", port: 8883, tls: true))
        #expect(try MQTTBrokerURL("mqtt://localhost:20001/") == MQTTBrokerURL(host: "localhost", port: 20001, tls: false))
        #expect(try MQTTBrokerURL("mqtt://[::1]:1884") == MQTTBrokerURL(host: "::1", port: 1884, tls: false))
        #expect(try MQTTBrokerURL("mqtt://[::1]:1884").description == "mqtt://[::1]:1884")
        #expect(try MQTTBrokerURL("mqtt://broker_1.example-net.org").host == "broker_1.example-net.org")
        #expect(try MQTTBrokerURL("mqtt://[fe80::1%eth0]:1883").host == "fe80::1%eth0")
    }

    @Test(arguments: ["http://x", "mqtt://", "mqtt://user:pw@host", "mqtt://host:0", "mqtt://host:70000", "mqtt://host/topic", "mqtt://host:x",
                      "mqtt://h\u{1B}", "mqtt://a b", "mqtt://h\n:1883", "mqtts://h\u{202E}x"])
    func refused(_ text: String) {
        #expect(throws: MQTTError.self) { try MQTTBrokerURL(text) }
    }
}
