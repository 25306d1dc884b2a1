import Foundation

/// Finds a key given twice in one JSON object. `JSONSerialization` keeps the last of them without
/// a word, so `{"id":"a","id":"b"}` read as `b` here while another reader (a broker's filter, a
/// provider's log) may take `a`: I-JSON (RFC 7493 §2.3) forbids duplicate names, and the daemon
/// refuses such a request or remote message (`badRequest`), as its config reader refuses a key
/// given twice.
///
/// One pass over text already parsed as JSON (the structure is taken as valid); keys with escapes
/// (`"\u0069d"`) are compared by what they mean. Each object has a set of its own keys: the same
/// key in two objects (siblings or nested) is no duplicate.
public enum JSONDuplicateKeys {
    /// A key given twice: the key (as it reads, at most 64 characters of it) and the byte offset
    /// (0-based) of its second opening quote.
    public struct Duplicate: Sendable, Equatable {
        public var key: String
        public var offset: Int
        /// The object's depth: 1 for the top-level object.
        public var depth: Int
    }

    /// The first key given twice in one object of `bytes`, or nil. Keys are compared as Swift
    /// strings (canonical equivalence, as the `[String: JSONValue]` a request becomes: "é" and
    /// "e\u{301}" are one key there).
    /// - Parameter bytes: JSON text that a parser has accepted.
    public static func first(in bytes: [UInt8]) -> Duplicate? {
        var found: Duplicate?
        scan(bytes) { found = $0; return false }
        return found
    }

    /// The keys given more than once in the top-level object of `bytes` (all of them, not only
    /// the first): a reader must not name an `id` that the text gives twice (which one would it
    /// be?), even when another key's duplicate comes first.
    /// - Parameter bytes: JSON text that a parser has accepted.
    public static func topLevelKeysGivenTwice(in bytes: [UInt8]) -> Set<String> {
        var keys: Set<String> = []
        scan(bytes) { if $0.depth == 1 { keys.insert($0.key) }; return true }
        return keys
    }

    /// Calls `found` for each key given again in its object, in text order, while it returns true.
    private static func scan(_ bytes: [UInt8], _ found: (Duplicate) -> Bool) {
        // Per open container: whether it is an object and, if so, whether a key comes next; the
        // objects' key sets apart, changed in place (a set copied per key would make a line of
        // many keys cost their square).
        var isObject: [Bool] = [], expectingKey: [Bool] = []
        var keys: [Set<String>] = []
        var inString = false, escaped = false, hasEscape = false, isKey = false
        var start = 0
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if inString {
                if escaped { escaped = false }
                else if b == UInt8(ascii: "\\") { escaped = true; hasEscape = true }
                else if b == UInt8(ascii: "\"") {
                    inString = false
                    if isKey, !keys.isEmpty {
                        let raw = bytes[(start + 1)..<i]
                        let key = hasEscape ? unescaped(Array(raw)) : String(decoding: raw, as: UTF8.self)
                        if !keys[keys.count - 1].insert(key).inserted,
                           !found(Duplicate(key: String(key.prefix(64)), offset: start, depth: isObject.count)) {
                            return
                        }
                    }
                }
                i += 1
                continue
            }
            switch b {
            case UInt8(ascii: "\""):
                inString = true; escaped = false; hasEscape = false; start = i
                isKey = isObject.last == true && expectingKey.last == true
                if isKey { expectingKey[expectingKey.count - 1] = false }
            case UInt8(ascii: "{"):
                isObject.append(true); expectingKey.append(true); keys.append([])
            case UInt8(ascii: "["):
                isObject.append(false); expectingKey.append(false)
            case UInt8(ascii: "}"):
                if !isObject.isEmpty { isObject.removeLast(); expectingKey.removeLast() }
                if !keys.isEmpty { keys.removeLast() }
            case UInt8(ascii: "]"):
                if !isObject.isEmpty { isObject.removeLast(); expectingKey.removeLast() }
            case UInt8(ascii: ","):
                if isObject.last == true { expectingKey[expectingKey.count - 1] = true }
            default: break
            }
            i += 1
        }
    }

    /// A key with escapes as it reads (`\u0069d` → `id`), read by the JSON parser; the raw text
    /// if it cannot read it (half a surrogate pair). Also ``JSONSyntax``'s reading of a key.
    static func unescaped(_ raw: [UInt8]) -> String {
        if !raw.contains(UInt8(ascii: "\\")) { return String(decoding: raw, as: UTF8.self) }
        guard case let .string(s)? = try? JSONValue.parse(Data([UInt8(ascii: "\"")] + raw + [UInt8(ascii: "\"")])) else {
            return String(decoding: raw, as: UTF8.self)
        }
        return s
    }
}
