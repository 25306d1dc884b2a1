import Foundation
import InterludePolicy
import Testing
@testable import InterludeWire

/// `JSONValueDecoder` (issue 9: params decoded from the parsed value, not written out and parsed
/// again) must give what the text round trip through `JSONDecoder` gave: the same value, or an
/// error that reads the same (`WireRequest.describe`, what a client is told). Held to it on every
/// field of several params types, each replaced by values of every kind, and each one removed.
@Suite struct JSONValueDecoderTests {
    /// Values of every kind, and numbers at the edges of the types they land in.
    static let oddValues: [JSONValue] = [
        .null, .bool(true), .bool(false), .string(""), .string("x"), .string("2"), .number(0), .number(1), .number(-1),
        .number(1.5), .number(-0.25), .number(2), .number(3e9), .number(5e15), .number(1e300), .array([]), .array([.number(1)]),
        .array([.string("a"), .null]), .object([:]), .object(["a": .number(1)]), .object(["hour": .number(9)]),
    ]

    /// What a decode gave, in comparable form.
    enum Outcome: Equatable {
        case value(JSONValue)
        case failed(String)
    }

    static func outcome<P: Codable>(_ body: () throws -> P) -> Outcome {
        do { return .value(try JSONValue(encoding: body())) } catch let e as DecodingError {
            return .failed(WireRequest.describe(e))
        } catch { return .failed("\(error)") }
    }

    /// Every variant of `base`: each key (and each key of the objects in it) set to each odd
    /// value, and each removed.
    static func variants(of base: [String: JSONValue]) -> [JSONValue] {
        var out: [JSONValue] = [.object(base)]
        for (k, v) in base {
            var without = base; without[k] = nil
            out.append(.object(without))
            for odd in oddValues { var o = base; o[k] = odd; out.append(.object(o)) }
            if case let .object(inner) = v {
                for variant in variants(of: inner) { var o = base; o[k] = variant; out.append(.object(o)) }
            }
            if case let .array(items) = v, case let .object(first)? = items.first {
                for variant in variants(of: first) { var o = base; o[k] = .array([variant] + items.dropFirst()); out.append(.object(o)) }
            }
        }
        return out + oddValues
    }

    static func compare<P: Codable>(_ type: P.Type, _ base: [String: JSONValue]) {
        for v in variants(of: base) {
            let direct = outcome { try v.decode(P.self) }
            let text = outcome { try v.decodeThroughText(P.self) }
            #expect(direct == text, "\(P.self) from \(v): direct \(direct), through text \(text)")
        }
    }

    @Test func addNotificationParamsDecodeAsThroughText() {
        Self.compare(AddNotificationParams.self, [
            "identifier": .string("n1"), "title": .string("Hi"), "subtitle": .string("s"), "body": .string("b"),
            "sound": .string("default"), "criticalVolume": .number(0.5), "badge": .number(3), "thread": .string("t"),
            "category": .string("c"), "level": .string("timeSensitive"), "relevance": .number(0.2), "promotional": .bool(false),
            "alertOnce": .bool(true), "sender": .string("ann"), "isCall": .bool(false), "userInfo": .object(["k": .string("v")]),
            "trigger": .object(["calendar": .object(["hour": .number(9), "minute": .number(30)]), "repeats": .bool(true)]),
        ])
    }

    @Test func otherParamsDecodeAsThroughText() {
        Self.compare(RegisterParams.self, ["category": .string("playback"), "mode": .string("default"),
                                           "options": .array([.string("mixWithOthers"), .string("duckOthers")])])
        Self.compare(FocusSetParams.self, ["name": .string("sleep"), "for": .number(60)])
        Self.compare(RegisterCategoriesParams.self, ["categories": .array([.object([
            "identifier": .string("chat"), "actions": .array([.object(["identifier": .string("reply"), "title": .string("Reply"),
                                                                      "options": .array([.string("foreground")])])]),
        ])])])
        Self.compare(SettingsParams.self, ["app": .string("a.b"), "change": .object(["sound": .bool(false), "remote": .bool(true)])])
    }

    /// A free-form value (`JSONValue` inside params) comes back as it was given.
    @Test func aJSONValueInsideIsTakenAsItIs() throws {
        struct Holder: Codable, Equatable { var any: JSONValue; var list: [JSONValue]? }
        let v: JSONValue = .object(["any": .object(["x": .array([.null, .bool(true), .number(1.25), .string("s")])]), "list": .array([.number(1)])])
        #expect(try v.decode(Holder.self) == v.decodeThroughText(Holder.self))
    }
}
