import Foundation
import Testing
@testable import InterludeWire

/// PROTOCOL.md "Framing", REMOTE.md: a key given twice in one object is refused (`badRequest`);
/// `JSONSerialization` kept the last one without a word (a stranger's find: a remote message
/// with `"id":"d1","id":"d2"` was delivered as d2).
@Suite struct JSONDuplicateKeysTests {
    @Test(arguments: [
        (#"{"a":1,"b":2}"#, nil as String?, nil as Int?),
        (#"{"a":1,"a":2}"#, "a", 7),
        (#"{"id":"x","method":"m","id":"y"}"#, "id", 23),
        (#"{"a":{"k":1},"b":{"k":2}}"#, nil, nil),                        // the same key in sibling objects
        (#"{"k":{"k":{"k":1}}}"#, nil, nil),                              // and nested ones
        (#"{"a":[{"x":1},{"x":2}],"x":3}"#, nil, nil),                   // objects in an array
        (#"{"a":"b","b":"a"}"#, nil, nil),                                // values are not keys
        (#"{"a":[1,"a",{"a":1}],"b":{"c":1,"c":2}}"#, "c", 32),
        (#"{"\u0069d":1,"id":2}"#, "id", 13),                             // an escape is what it means
        (#"{"q\"":1,"q\\":2,"q\"":3}"#, "q\"", 17),                       // escaped quotes inside a key
        (#"{"\u00e9":1,"e\u0301":2}"#, "é", 12),                          // canonically equivalent, as Swift's dictionary
        (#"[{"a":1},{"a":1}]"#, nil, nil),
    ])
    func theFirstKeyGivenTwiceInOneObject(_ text: String, key: String?, offset: Int?) {
        let d = JSONDuplicateKeys.first(in: Array(text.utf8))
        #expect(d?.key == key && d?.offset == offset, "\(text): \(String(describing: d))")
    }

    @Test func aRequestWithAKeyTwiceIsABadRequest() {
        #expect {
            _ = try WireRequest.parse(Array(#"{"id":1,"method":"status","params":{"a":1,"a":2}}"#.utf8))
        } throws: { e in
            guard let e = e as? WireParseError else { return false }
            return e.error.code == .badRequest && e.error.message.contains(#"key "a" is given twice in one object (at byte 42)"#)
        }
    }

    /// A remote message with a field twice is malformed; its id is named for the receipt unless
    /// the id itself is the field given twice.
    @Test func aRemoteMessageWithAFieldTwiceIsMalformed() {
        for (text, id) in [(#"{"v":1,"id":"d1","id":"d2","app":"a.b","title":"t"}"#, nil as String?),
                           (#"{"v":1,"id":"m","app":"a.b","title":"t","title":"u"}"#, "m")] {
            #expect {
                _ = try RemoteMessage.parse(Array(text.utf8))
            } throws: { e in
                guard let e = e as? RemoteMessageError else { return false }
                return e.error.code == .badRequest && e.error.message.contains("is given twice") && e.id == id && e.app == "a.b"
            }
        }
    }

    /// One object of 6,000 keys (a 64 KiB line): the last one, given before, is found.
    @Test func aKeyTwiceAmongManyIsFound() {
        let text = "{" + (0..<6000).map { "\"k\($0)\":1" }.joined(separator: ",") + ",\"k0\":2}"
        let d = JSONDuplicateKeys.first(in: Array(text.utf8))
        #expect(d?.key == "k0" && d?.offset == text.utf8.count - 7 && d?.depth == 1, "\(String(describing: d))")
    }
}
