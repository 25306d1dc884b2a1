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

    /// A type that writes one key twice, a nested container and a super encoder: the text keeps
    /// the last value of a key (as the dictionary of `JSONValue(encoding:)` and `JSONEncoder` do).
    struct Twice: Encodable {
        enum K: String, CodingKey { case b, a, é = "é", z, nested, `super` }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: K.self)
            try c.encode(1, forKey: .b)
            try c.encode("first", forKey: .a)
            try c.encode(2, forKey: .é)
            var n = c.nestedContainer(keyedBy: K.self, forKey: .nested)
            try n.encode(true, forKey: .z)
            try n.encodeNil(forKey: .a)
            try c.encode("last", forKey: .a)
            try Inner(a: 5, b: "s", c: [1.5]).encode(to: c.superEncoder())
        }
    }

    /// ``WireCoding/encode(_:)`` writes its text straight from the encoder's tree (issue 9): the
    /// bytes `JSONEncoder` writes (sorted keys, slashes as they are) and the ones `JSONWriter`
    /// writes for `JSONValue(encoding:)`, for every shape above, non-ASCII keys sorted by bytes
    /// and a key written twice.
    @Test func textIsTheBytesJSONEncoderWrites() throws {
        let v = Outer(name: "n/é\u{1}\"", flag: false, missing: nil, present: 0, inner: Inner(a: 3, b: "q", c: [-2, 1e-7, 123456789012345678]),
                      shapes: [.square(Inner(a: 1, b: nil, c: [2])), .circle(radius: 0.3)],
                      map: ["é": [1], "e": [2], "E": [], "ee": [3]], byNumber: [10: "ten", 9: "nine"],
                      value: .object(["b": .number(1), "a": .object(["y": .string("x")])]), big: -(1 << 53), fraction: 2.5e-300)
        #expect(try WireCoding.encode(v) == WireCoding.encoder.encode(v))
        #expect(try WireCoding.encode(v) == JSONWriter.data(JSONValue(encoding: v)))
        let twice = try WireCoding.encode(Twice())
        #expect(String(decoding: twice, as: UTF8.self)
                == #"{"a":"last","b":1,"nested":{"a":null,"z":true},"super":{"a":5,"b":"s","c":[1.5]},"é":2}"#)
        #expect(twice == JSONWriter.data(try JSONValue(encoding: Twice())))
        #expect(twice == (try WireCoding.encoder.encode(Twice())))
        #expect(throws: EncodingError.self) { try WireCoding.encode(Inner(a: 1, b: nil, c: [.nan])) }
    }

    @Test func aNonFiniteNumberThrowsAsJSONEncoderDoes() {
        #expect(throws: EncodingError.self) { try JSONValue(encoding: [Double.infinity]) }
    }
}
