import Foundation

/// The grammar of JSON text (RFC 8259 §2–§7), checked on the raw bytes when the parser has refused
/// a line, to say where and why in the protocol's words ("the text ends inside the string opened at
/// byte 40") instead of the parser's ("Unexpected end of file during JSON parse."), and to tell a
/// broken line from one that is well-formed but holds a value no reader can take (half a UTF-16
/// surrogate pair, a number beyond a 64-bit float). In a well-formed line the top-level members can
/// be found, so the request's `id` is echoed with such an error (PROTOCOL.md "Reply": `"id": null`
/// only when the id cannot be read).
///
/// Stricter than Foundation's parser in one way: a comma before `}` or `]` (`{"id":1,}`) is a break
/// here (RFC 8259 has none), which that parser reads; lines it reads never come here.
///
/// Not a parser: it builds no values (Foundation's `JSONSerialization` stays the one that reads
/// them); it runs only on the error path. One pass, an explicit stack, no recursion (the depth is
/// bounded before by ``JSONDepth``; the stack would hold any depth anyway).
public enum JSONSyntax {
    /// Where the text stops being JSON: the byte offset (0-based) and what is wrong there, as the
    /// end of a sentence ("the text ends inside the string opened at byte 12").
    public struct Problem: Sendable, Equatable, Error {
        public var offset: Int
        public var message: String
    }

    /// One member of the top-level object: its key as it reads (escapes decoded) and the byte range
    /// of its value's text.
    public struct Member: Sendable, Equatable {
        public var key: String
        public var value: Range<Int>
    }

    /// The first place `bytes` breaks JSON's grammar, or nil when it is well-formed JSON text (one
    /// value, whitespace around it allowed). Values are not judged beyond the grammar: a lone
    /// surrogate escape (`"\ud800"`) and `1e400` are well-formed.
    public static func problem(in bytes: [UInt8]) -> Problem? {
        do { _ = try scan(bytes); return nil } catch { return error }
    }

    /// The members of the top-level object of well-formed JSON text, in text order (a key given
    /// twice appears twice); empty when the text is not an object or not well-formed.
    public static func topLevelMembers(of bytes: [UInt8]) -> [Member] {
        (try? scan(bytes)) ?? []
    }

    private enum Container { case object, array }
    /// What the scanner expects next.
    private enum Expect { case value, key, colon, commaOrEnd }

    private static func scan(_ b: [UInt8]) throws(Problem) -> [Member] {
        var stack: [(kind: Container, opened: Int)] = []
        var expect = Expect.value
        var members: [Member] = []
        var pendingKey: String?    // a top-level key whose value comes next
        var valueStart = 0
        var sawValue = false
        var i = 0

        func describe(_ byte: UInt8) -> String {
            (0x21...0x7e).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x" + String(byte, radix: 16, uppercase: true)
        }
        func valueEnded(at end: Int) {
            if stack.count == 1, let key = pendingKey {
                members.append(Member(key: key, value: valueStart..<end)); pendingKey = nil
            }
            expect = stack.isEmpty ? .value : .commaOrEnd
            if stack.isEmpty { sawValue = true }
        }

        while i < b.count {
            let c = b[i]
            if c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { i += 1; continue }
            if sawValue { throw Problem(offset: i, message: "text after the JSON value (\(describe(c)) at byte \(i))") }
            switch expect {
            case .colon:
                guard c == UInt8(ascii: ":") else { throw Problem(offset: i, message: "expected ':' after a key, found \(describe(c)) at byte \(i)") }
                expect = .value; i += 1
            case .commaOrEnd:
                let top = stack[stack.count - 1]
                if c == UInt8(ascii: ",") { expect = top.kind == .object ? .key : .value; i += 1; continue }
                let close = top.kind == .object ? UInt8(ascii: "}") : UInt8(ascii: "]")
                guard c == close else {
                    throw Problem(offset: i, message: "expected ',' or '\(Character(Unicode.Scalar(close)))' in the \(top.kind == .object ? "object" : "array") opened at byte \(top.opened), found \(describe(c)) at byte \(i)")
                }
                stack.removeLast(); i += 1; valueEnded(at: i)
            case .key:
                guard c == UInt8(ascii: "\"") else {
                    throw Problem(offset: i, message: "expected a key (a string in double quotes) in the object opened at byte \(stack[stack.count - 1].opened), found \(describe(c)) at byte \(i)")
                }
                let start = i
                i = try string(b, from: i)
                if stack.count == 1 { pendingKey = JSONDuplicateKeys.unescaped(Array(b[(start + 1)..<(i - 1)])) }
                expect = .colon
            case .value:
                if stack.count == 1 { valueStart = i }
                switch c {
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    stack.append((c == UInt8(ascii: "{") ? .object : .array, i)); i += 1
                    // An empty container closes at once; else a key or a value comes.
                    var j = i
                    while j < b.count, [0x20, 0x09, 0x0A, 0x0D].contains(b[j]) { j += 1 }
                    if j < b.count, b[j] == (c == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                        stack.removeLast(); i = j + 1; valueEnded(at: i)
                    } else {
                        expect = c == UInt8(ascii: "{") ? .key : .value
                    }
                case UInt8(ascii: "\""):
                    i = try string(b, from: i); valueEnded(at: i)
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    i = try number(b, from: i); valueEnded(at: i)
                case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                    let word: [UInt8] = c == UInt8(ascii: "t") ? Array("true".utf8) : c == UInt8(ascii: "f") ? Array("false".utf8) : Array("null".utf8)
                    guard b.count >= i + word.count, Array(b[i..<(i + word.count)]) == word else {
                        throw Problem(offset: i, message: "expected a value at byte \(i) (\(String(decoding: word, as: UTF8.self))?)")
                    }
                    i += word.count; valueEnded(at: i)
                default:
                    let hint = c == UInt8(ascii: "'") ? "; JSON strings take double quotes" : (c == UInt8(ascii: "+") || c == UInt8(ascii: ".")) ? "; a JSON number starts with a digit or '-'" : ""
                    throw Problem(offset: i, message: "expected a value, found \(describe(c)) at byte \(i)\(hint)")
                }
            }
        }
        if let open = stack.last {
            throw Problem(offset: b.count, message: "the text ends inside the \(open.kind == .object ? "object" : "array") opened at byte \(open.opened)")
        }
        if !sawValue { throw Problem(offset: b.count, message: "the text holds no JSON value") }
        return members
    }

    /// The offset after the string that opens at `start` (its quote).
    private static func string(_ b: [UInt8], from start: Int) throws(Problem) -> Int {
        var i = start + 1
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") { return i + 1 }
            if c < 0x20 {
                throw Problem(offset: i, message: "a control character (U+00\(c < 0x10 ? "0" : "")\(String(c, radix: 16, uppercase: true))) inside the string opened at byte \(start), at byte \(i); JSON writes it as an escape (\\n, \\t, \\u00XX)")
            }
            if c == UInt8(ascii: "\\") {
                guard i + 1 < b.count else { break }
                switch b[i + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    i += 2
                case UInt8(ascii: "u"):
                    let hex = b[(i + 2)..<min(i + 6, b.count)]
                    guard hex.count == 4, hex.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }) else {
                        throw Problem(offset: i, message: "a \\u escape at byte \(i) needs four hex digits (\\u00e9)")
                    }
                    i += 6
                default:
                    throw Problem(offset: i, message: "\\\(Character(Unicode.Scalar(b[i + 1] < 0x80 ? b[i + 1] : 0x3F))) at byte \(i) is not a JSON escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)")
                }
                continue
            }
            i += 1
        }
        throw Problem(offset: b.count, message: "the text ends inside the string opened at byte \(start)")
    }

    /// The offset after the number that starts at `start`: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    private static func number(_ b: [UInt8], from start: Int) throws(Problem) -> Int {
        func digit(_ j: Int) -> Bool { j < b.count && b[j] >= 0x30 && b[j] <= 0x39 }
        func bad() -> Problem {
            Problem(offset: start, message: "a malformed number at byte \(start) (JSON numbers: -?digits[.digits][e[+-]digits], no leading zero, no '+')")
        }
        var i = start
        if b[i] == UInt8(ascii: "-") { i += 1 }
        guard digit(i) else { throw bad() }
        if b[i] == UInt8(ascii: "0") { i += 1; if digit(i) { throw bad() } } else { while digit(i) { i += 1 } }
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1; guard digit(i) else { throw bad() }
            while digit(i) { i += 1 }
        }
        if i < b.count, b[i] | 0x20 == UInt8(ascii: "e") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard digit(i) else { throw bad() }
            while digit(i) { i += 1 }
        }
        return i
    }
}
