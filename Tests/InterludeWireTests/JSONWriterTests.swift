import Foundation
import InterludePolicy
import InterludeWire
import Testing

/// ``JSONWriter`` writes the same bytes as the protocol's `JSONEncoder` (issue 9: the daemon's
/// replies, events and stored rows go through it instead).
@Suite struct JSONWriterTests {
    /// The suite's deterministic generator (`SplitMix`, WireTests), so that a failure is
    /// reproducible by its seed.
    typealias Random = SplitMix

    static let characters: [String] = ["a", "Z", "0", "9", "_", "-", ".", "/", "\"", "\\", "\n", "\r", "\t", "\u{08}", "\u{0C}",
                                       "\u{01}", "\u{1F}", "\u{7F}", " ", "é", "語", "😀", "\u{2028}", "A", "b", "10", "2"]

    static func string(_ r: inout Random) -> String {
        (0..<r.int(8)).map { _ in characters[r.int(characters.count)] }.joined()
    }

    static func number(_ r: inout Random) -> Double {
        switch r.int(8) {
        case 0: return Double(r.int(1000)) - 500
        case 1: return Double(r.int(1_000_000)) / 1000
        case 2: return Double(bitPattern: r.next() & 0x7FEF_FFFF_FFFF_FFFF) * (r.int(2) == 0 ? 1 : -1)  // any finite
        case 3: return [0.1, 0.2 + 0.1, 1e15, 1e15 - 1, 1e16, 1e20, 1e-7, Double.leastNonzeroMagnitude, 1.7976931348623157e308, -0.0, 123456789.125][r.int(11)]
        case 4: return 1_764_500_000 + Double(r.int(1_000_000)) / 1000
        case 5: return Double(Int64(bitPattern: r.next()) >> r.int(64))
        default: return Double(r.int(100))
        }
    }

    static func value(_ r: inout Random, depth: Int) -> JSONValue {
        switch r.int(depth > 3 ? 4 : 6) {
        case 0: return .null
        case 1: return .bool(r.int(2) == 0)
        case 2: return .number(number(&r))
        case 3: return .string(string(&r))
        case 4: return .array((0..<r.int(5)).map { _ in value(&r, depth: depth + 1) })
        default:
            var o: [String: JSONValue] = [:]
            for _ in 0..<r.int(6) { o[string(&r)] = value(&r, depth: depth + 1) }
            return .object(o)
        }
    }

    @Test func writesTheSameBytesAsJSONEncoderForRandomValues() throws {
        for seed in 0..<3000 {
            var r = Random(seed: UInt64(seed))
            let v = Self.value(&r, depth: 0)
            let expected = try WireCoding.encoder.encode(v)
            let written = JSONWriter.data(v)
            #expect(written == expected, "seed \(seed): \(String(decoding: written, as: UTF8.self)) against \(String(decoding: expected, as: UTF8.self))")
            if written != expected { return }
        }
    }

    @Test func typedValuesEncodeAsJSONEncoderWritesThem() throws {
        let event = WireEvent(event: "delivered", data: .object(["title": .string("a/b \"c\"\n"), "n": .number(3)]), time: 1_764_500_000.125)
        #expect(try WireCoding.encode(event) == WireCoding.encoder.encode(event))
        let reply = WireReply(id: .number(7), error: WireError(.badRequest, "no \\ way"))
        #expect(try WireCoding.encode(reply) == WireCoding.encoder.encode(reply))
        let whole = WireEvent(event: "x", data: .null, time: 1_764_500_000)
        #expect(try WireCoding.encode(whole) == WireCoding.encoder.encode(whole))
        let decision = NotificationDecision(outcome: .downgraded(from: .critical, to: .active), requestedLevel: .critical, level: .active,
                                            banner: true, sound: NotificationSoundDecision(name: "default", volume: 0.35), badge: 2,
                                            rules: ["N3"], notes: ["not entitled"])
        #expect(try WireCoding.encode(decision) == WireCoding.encoder.encode(decision))
    }

    @Test func aNonFiniteNumberIsRefusedAsJSONEncoderRefusesIt() {
        #expect(throws: EncodingError.self) { try WireCoding.encode(WireEvent(event: "x", data: .null, time: .infinity)) }
    }
}

/// `ServerMessage.parse` takes events and replies from the parsed value (issue 9: the client's
/// CPU under a burst): the same messages as the parsed value decoded again with `JSONDecoder`
/// (what it did before; numbers are `JSONSerialization`'s either way, README "Status").
@Suite struct ServerMessageParseTests {
    @Test func eventsAndRepliesParseAsJSONDecoderDecodesThem() throws {
        for seed in 0..<500 {
            var r = JSONWriterTests.Random(seed: UInt64(seed))
            let data = JSONWriterTests.value(&r, depth: 0)
            let event = WireEvent(event: "e\(seed)", data: data, time: 1_764_500_000 + Double(seed) / 8)
            let eventLine = try WireCoding.encode(event)
            #expect(try ServerMessage.parse(Array(eventLine)) == .event(try JSONValue.parse(eventLine).decode(WireEvent.self)))
            let reply = WireReply(id: .number(Double(seed)), result: data)
            let replyLine = try WireCoding.encode(reply)
            #expect(try ServerMessage.parse(Array(replyLine)) == .reply(try JSONValue.parse(replyLine).decode(WireReply.self)))
        }
        let error = WireReply(id: .string("x"), error: WireError(.rateLimited, "too many"))
        #expect(try ServerMessage.parse(Array(WireCoding.encode(error))) == .reply(error))
    }

    @Test func malformedEventsAndErrorsAreRefused() {
        for line in [#"{"event":1,"data":{},"time":1}"#, #"{"event":"x","data":{},"time":"now"}"#,
                     #"{"id":1,"error":{"code":"noSuchCode","message":"m"}}"#, #"{"id":1,"error":{"code":"badRequest"}}"#] {
            #expect(throws: (any Error).self, "\(line)") { try ServerMessage.parse(Array(line.utf8)) }
        }
    }
}

extension SplitMix {
    /// A number in 0..<n.
    mutating func int(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
