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

    /// The reply echoes the request's id (PROTOCOL.md: `null` only when it cannot be read), unless
    /// the id is a key given twice, wherever that duplicate comes.
    @Test(arguments: [
        (#"{"id":1,"method":"status","params":{"a":1,"a":2}}"#, JSONValue.number(1) as JSONValue?, #"key "a" is given twice in one object (at byte 42)"#),
        (#"{"id":"r7","method":"status","method":"status"}"#, .string("r7"), #"key "method" is given twice"#),
        (#"{"id":1,"method":"status","id":2}"#, nil, #"key "id" is given twice"#),
        (#"{"method":"status","method":"x","id":1,"id":2}"#, nil, #"key "method" is given twice"#),  // not the first duplicate
        (#"{"id":1,"method":"status","params":{"id":1,"id":2}}"#, .number(1), #"key "id" is given twice"#),  // an id in params
    ])
    func aRequestWithAKeyTwiceIsABadRequest(_ text: String, id: JSONValue?, message: String) {
        #expect {
            _ = try WireRequest.parse(Array(text.utf8))
        } throws: { e in
            guard let e = e as? WireParseError else { return false }
            return e.error.code == .badRequest && e.error.message.contains(message) && e.id == id
        }
    }

    @Test(arguments: [
        (#"{"a":1,"a":2,"id":1,"id":2}"#, ["a", "id"]),
        (#"{"a":{"id":1,"id":2},"b":1}"#, []),
        (#"{"a":1,"b":2}"#, []),
    ])
    func everyTopLevelKeyGivenTwice(_ text: String, keys: [String]) {
        #expect(JSONDuplicateKeys.topLevelKeysGivenTwice(in: Array(text.utf8)) == Set(keys), "\(text)")
    }

    /// A remote message with a field twice is malformed; its id is named for the receipt unless
    /// the id itself is the field given twice.
    @Test func aRemoteMessageWithAFieldTwiceIsMalformed() {
        for (text, id) in [(#"{"v":1,"id":"d1","id":"d2","app":"a.b","title":"t"}"#, nil as String?),
                           (#"{"v":1,"id":"m","app":"a.b","title":"t","title":"u"}"#, "m"),
                           (#"{"v":1,"title":"t","title":"u","id":"d1","id":"d2","app":"a.b"}"#, nil)] {  // the id's is not the first
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
