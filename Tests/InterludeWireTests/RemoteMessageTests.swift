import Foundation
import InterludePolicy
import Testing
@testable import InterludeWire

/// Issue 11 / REMOTE.md: the version 1 message format and what makes a message malformed.
@Suite struct RemoteMessageTests {
    func parse(_ text: String, max: Int = RemoteMessage.defaultMaxBytes) throws(RemoteMessageError) -> RemoteMessage {
        try RemoteMessage.parse(Array(text.utf8), maxBytes: max)
    }

    @Test func aMessageHasTheFieldsOfNotificationAdd() throws {
        let m = try parse(#"{"v":1,"id":"m-1","app":"org.example.Chat","title":"Your turn","body":"b","level":"timeSensitive","sound":"default","thread":"game-7"}"#)
        #expect(m.id == "m-1" && m.app == "org.example.Chat")
        #expect(m.notification.title == "Your turn" && m.notification.level == .timeSensitive && m.notification.thread == "game-7")
        #expect(m.notification.identifier == "m-1")  // default: the message id
        let n = try parse(#"{"v":1,"id":"m-2","app":"a.b","title":"t","identifier":"score"}"#)
        #expect(n.notification.identifier == "score")
    }

    @Test func encodedMessagesParseBack() throws {
        let m = RemoteMessage(id: "x", app: "org.example.Chat", notification: AddNotificationParams(title: "t", body: "b", level: .passive))
        #expect(try RemoteMessage.parse(m.encoded()) == RemoteMessage(id: "x", app: "org.example.Chat",
                                                                       notification: AddNotificationParams(identifier: "x", title: "t", body: "b", level: .passive)))
    }

    @Test(arguments: [
        ("not json", WireErrorCode.badRequest, nil as String?),
        (#"[1]"#, .badRequest, nil),
        (#"{"id":"m","app":"a.b","title":"t"}"#, .badRequest, "m"),                 // no v
        (#"{"v":2,"id":"m","app":"a.b","title":"t"}"#, .badRequest, "m"),           // a later version
        (#"{"v":1,"app":"a.b","title":"t"}"#, .badRequest, nil),                    // no id
        (#"{"v":1,"id":"","app":"a.b","title":"t"}"#, .badRequest, ""),
        (#"{"v":1,"id":"m","app":"has space","title":"t"}"#, .badRequest, "m"),
        (#"{"v":1,"id":"m","app":"a.b"}"#, .badRequest, "m"),                       // no title
        (#"{"v":1,"id":"m","app":"a.b","title":"t","level":"loud"}"#, .badRequest, "m"),
        (#"{"v":1,"id":"m","app":"a.b","title":"t","colour":"red"}"#, .unknownField, "m"),
        (#"{"v":1,"id":"m","app":"a.b","title":"t","trigger":{"soon":1}}"#, .unknownField, "m"),
        // Well-formed, refused by the parser for a value elsewhere: the id is still read (it was not).
        (#"{"v":1,"id":"m","app":"a.b","title":"\ud800"}"#, .badRequest, "m"),
        (#"{"v":1,"app":"a.b","title":"t","relevance":1e400,"id":"m"}"#, .badRequest, "m"),
        (#"{"v":1,"id":"m","app":"a.b","title":"t"#, .badRequest, nil),             // broken: not read
    ])
    func malformedMessagesAreRefusedWithWhatCouldBeRead(text: String, code: WireErrorCode, id: String?) {
        #expect {
            _ = try parse(text)
        } throws: { e in
            guard let e = e as? RemoteMessageError else { return false }
            return e.error.code == code && e.id == id
        }
    }

    /// The version a provider sent is named as it wrote it ("2", not "2.0").
    @Test(arguments: [(#"2"#, "format version 2 is"), (#"1.5"#, "format version 1.5 is"), (#"-3"#, "format version -3 is")])
    func anotherVersionIsNamedAsSent(v: String, said: String) {
        #expect {
            _ = try parse(#"{"v":\#(v),"id":"m","app":"a.b","title":"t"}"#)
        } throws: { e in
            (e as? RemoteMessageError)?.error.message.contains(said) == true
        }
    }

    @Test func anOversizedMessageIsRefusedBeforeItIsParsed() {
        let big = #"{"v":1,"id":"m","app":"a.b","title":""# + String(repeating: "x", count: 20000) + #""}"#
        #expect(throws: RemoteMessageError(WireError(.tooLarge, "the message has \(big.utf8.count) bytes; at most 16384"), id: "m", app: "a.b")) { try parse(big) }
        #expect(throws: Never.self) { try parse(big, max: 32768) }
    }

    /// A message with invalid UTF-8 (as `mosquitto_pub` or `interlude push --stdin --raw` send
    /// it) is `badRequest`, and its receipt still names the id and app when those are readable,
    /// so the provider can match it; an id that holds the invalid bytes is not named.
    @Test(arguments: [
        (Array(#"{"v":1,"id":"m","app":"a.b","title":"caf"#.utf8) + [0xE9] + Array(#""}"#.utf8), "m" as String?, "a.b" as String?),
        (Array(#"{"v":1,"id":"m"#.utf8) + [0xFF] + Array(#"","app":"a.b","title":"t"}"#.utf8), nil, "a.b"),
        ([0xFF, 0xFE] + Array(#"{"v":1,"id":"m"}"#.utf8), nil, nil),
    ])
    func invalidUTF8IsMalformedWithTheReadableIDs(bytes: [UInt8], id: String?, app: String?) {
        #expect {
            _ = try RemoteMessage.parse(bytes)
        } throws: { e in
            guard let e = e as? RemoteMessageError else { return false }
            return e.error.code == .badRequest && e.error.message.contains("UTF-8") && e.id == id && e.app == app
        }
    }

    /// A message may nest 32 levels, as REMOTE.md says, and an error's position counts from the
    /// message's own first byte (it counted from a wrapper the daemon put around it, and a
    /// message could nest only 31).
    @Test func nestingAndErrorPositionsCountFromTheMessage() {
        let head = #"{"v":1,"id":"m","app":"a.b","title":"t","userInfo":{"k":"#
        func nested(_ levels: Int) -> String { head + String(repeating: "[", count: levels) + String(repeating: "]", count: levels) + "}}" }
        // 1 (the message) + 1 (userInfo) + 30 arrays = 32 levels: not refused for its depth.
        do { _ = try parse(nested(30)) } catch { #expect(!error.error.message.contains("nested"), "\(error)") }
        // One more: refused at the 33rd bracket, byte head + 30 of the message.
        #expect {
            _ = try parse(nested(31))
        } throws: { e in
            (e as? RemoteMessageError)?.error.message.contains("nested more than 32 levels deep (at byte \(head.utf8.count + 30))") == true
        }
    }

    @Test func deepNestingIsRefused() {
        let deep = #"{"v":1,"id":"m","app":"a.b","title":"t","userInfo":"# + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}"
        // Refused, its id and app still named for the receipt (a stranger's find: no id, so
        // `push --wait-receipt` could not match it).
        #expect(throws: RemoteMessageError(WireError(.badRequest, "JSON nested more than 32 levels deep (at byte 82); the protocol allows 32"), id: "m", app: "a.b")) { try parse(deep) }
        let deeper = #"{"v":1,"id":"m","app":"a.b","title":"t","userInfo":"# + String(repeating: "[", count: 600) + String(repeating: "]", count: 600) + "}"
        #expect {
            _ = try parse(deeper)
        } throws: { e in (e as? RemoteMessageError)?.id == nil }
    }

    @Test func receiptsEncodeTheirStatusAndRules() throws {
        let r = RemoteReceipt(id: "m", device: "d", app: "a.b", identifier: "m", status: .silenced, rules: ["N7"], decision: nil, error: nil, time: 1)
        let o = try JSONSerialization.jsonObject(with: Data(r.encoded())) as! [String: Any]
        #expect(o["status"] as? String == "silenced" && o["rules"] as? [String] == ["N7"] && o["v"] as? Int == 1)
        #expect(RemoteTopics(prefix: "interlude/devices", device: "d").receipts == "interlude/devices/d/receipts")
        #expect(RemoteTopics.deviceProblem("kiosk-7.floor_2") == nil)
        #expect(RemoteTopics.deviceProblem("a/b") != nil && RemoteTopics.deviceProblem("+") != nil && RemoteTopics.deviceProblem("") != nil)
    }

    /// A topic prefix with a wildcard or an empty level is refused (the daemon started with one and
    /// only logged that its subscription failed).
    @Test(arguments: [("interlude/devices", true), ("fleet.eu/kiosks", true), ("a/#/b", false), ("+", false), ("", false),
                      ("/lead", false), ("trail/", false), ("a//b", false), ("nul\u{0}", false)])
    func topicPrefixesWithoutWildcardsOrEmptyLevels(_ prefix: String, _ ok: Bool) {
        #expect((RemoteTopics.prefixProblem(prefix) == nil) == ok)
    }
}
