import Foundation
import Testing
import InterludePolicy
import InterludeWire

/// `JSONValue(encoding:)` builds the value directly (issue 9): it must be the value that the
/// text round trip (`JSONEncoder`, then `JSONSerialization`) gave, for every shape the daemon
/// publishes: nested structs, enums with associated values, optionals left out, dictionaries,
/// arrays, integers and fractions.
@Suite struct JSONValueEncoderTests {
    struct Inner: Codable { var a: Int; var b: String?; var c: [Double] }
    enum Shape: Codable { case circle(radius: Double), square(Inner), none }
    struct Outer: Codable {
        var name: String
        var flag: Bool
        var missing: Int?
        var present: Int?
        var inner: Inner
        var shapes: [Shape]
        var map: [String: [Int]]
        var byNumber: [Int: String]
        var value: JSONValue
        var big: Int64
        var fraction: Double
    }

    func viaText<T: Encodable>(_ v: T) throws -> JSONValue { try JSONValue.parse(WireCoding.encoder.encode(v)) }

    @Test func sameValueAsTheTextRoundTrip() throws {
        let v = Outer(name: "n/é", flag: true, missing: nil, present: 7, inner: Inner(a: -3, b: nil, c: [0.5, 2, 1e300]),
                      shapes: [.circle(radius: 1.25), .square(Inner(a: 1, b: "x", c: [])), .none],
                      map: ["k": [1, 2], "e": []], byNumber: [3: "three"], value: .object(["z": .array([.null, .bool(false)])]),
                      big: 1 << 52, fraction: 0.1)
        let direct = try JSONValue(encoding: v)
        #expect(direct == (try viaText(v)))
        #expect(direct["missing"] == nil)  // encodeIfPresent: left out, not null
        #expect(direct["fraction"] == .number(0.1))
    }

    @Test func aDecisionAndADeliveredNotificationAsPublished() throws {
        let d = NotificationDecision(outcome: .downgraded(from: .critical, to: .active), requestedLevel: .critical, level: .active,
                                     banner: true, sound: NotificationSoundDecision(name: "default", volume: 0.5), badge: 2,
                                     rules: ["N3", "N11"], notes: ["a note"])
        var request = NotificationRequest(identifier: "id1", content: NotificationContent(title: "t"), trigger: nil)
        request.content.userInfo = ["k": "v"]
        let n = DeliveredNotification(app: "org.example.A", request: request, deliveredAt: NotificationTime(1_700_000_000.25), late: false,
                                      decision: d)
        #expect(try JSONValue(encoding: d) == (try viaText(d)))
        #expect(try JSONValue(encoding: n) == (try viaText(n)))
    }

    @Test func aNonFiniteNumberThrowsAsJSONEncoderDoes() {
        #expect(throws: EncodingError.self) { try JSONValue(encoding: [Double.infinity]) }
    }
}
