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
    }

    @Test(arguments: ["http://x", "mqtt://", "mqtt://user:pw@host", "mqtt://host:0", "mqtt://host:70000", "mqtt://host/topic", "mqtt://host:x"])
    func refused(_ text: String) {
        #expect(throws: MQTTError.self) { try MQTTBrokerURL(text) }
    }
}
