import Foundation

/// The grammar of JSON text (RFC 8259 §2–§7), checked on the raw bytes, to say where and why a line
/// is refused in the protocol's words ("the text ends inside the string opened at byte 40")
/// instead of the parser's ("Unexpected end of file during JSON parse."), and to tell a broken
/// line from one that is well-formed but holds a value no reader can take (half a UTF-16 surrogate
/// pair, a number beyond a 64-bit float). In a well-formed line the top-level members can be found,
/// so the request's `id` is echoed with such an error (PROTOCOL.md "Reply": `"id": null` only when
/// the id cannot be read).
///
/// Foundation's parser reads two things RFC 8259 does not have, or lets a reader ignore: a comma
/// before `}` or `]` (`{"id":1,}`), a break here, and a UTF-8 byte order mark before the text
/// (§8.1: a parser may ignore it), skipped here too. Every request and remote message is checked
/// here after that parser has read it, so a trailing comma is refused as JSON's grammar says.
///
/// Not a parser: it builds no values (Foundation's `JSONSerialization` stays the one that reads
/// them). One pass, an explicit stack, no recursion (the depth is bounded before by
/// ``JSONDepth``; the stack would hold any depth anyway).
public enum JSONSyntax {
    /// What is wrong, where: the byte offset (0-based, from the start of the text, a byte order
    /// mark counted) and, as the end of a sentence, what ("the text ends inside the string opened
    /// at byte 12").
    public struct Problem: Sendable, Equatable, Error {
        /// A break of the grammar (the text is not JSON), or a well-formed text's value no reader
        /// can take.
        public enum Kind: Sendable, Equatable {
            case grammar
            /// A `\u` escape of U+D800…U+DFFF not in a high-low pair: no Unicode text holds it.
            case halfSurrogatePair
            /// A number beyond ±1.8e308, what a 64-bit float holds.
            case numberBeyondDouble
        }
        public var kind: Kind
        public var offset: Int
        public var message: String
    }

    /// One member of the top-level object: its key as it reads (escapes decoded) and the byte range
    /// of its value's text.
    public struct Member: Sendable, Equatable {
        public var key: String
        public var value: Range<Int>
    }

    /// The first break of JSON's grammar in `bytes`; when there is none, the first value no reader
    /// can take (``Problem/Kind``); nil when the text is well-formed JSON (one value, whitespace
    /// around it) holding nothing of the kind. A broken text is named by its break even when a
    /// bad value comes before it: it is not JSON, whatever it holds.
    public static func problem(in bytes: [UInt8]) -> Problem? {
        do { _ = try scan(bytes, members: false); return nil } catch { return error }
    }

    /// The members of the top-level object of `bytes`, in text order (a key given twice appears
    /// twice), when the text is well-formed (values no reader takes allowed); empty when it is
    /// not an object or breaks the grammar.
    public static func topLevelMembers(of bytes: [UInt8]) -> [Member] {
        // Values are not judged: only a break of the grammar stops the members (one pass, where
        // judging them first scanned a text with a bad value twice).
        (try? scan(bytes, members: true, judgeValues: false)) ?? []
    }

    private enum Container { case object, array }
    /// What the scanner expects next.
    private enum Expect { case value, key, colon, commaOrEnd }

    private static func scan(_ b: [UInt8], members collect: Bool, judgeValues: Bool = true) throws(Problem) -> [Member] {
        var stack: [(kind: Container, opened: Int)] = []
        var expect = Expect.value
        var members: [Member] = []
        var pendingKey: String?    // a top-level key whose value comes next
        var valueStart = 0
        var sawValue = false
        var afterComma = false
        var valueProblem: Problem?  // the first, reported when the grammar holds
        var i = b.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0

        func describe(_ byte: UInt8) -> String {
            (0x21...0x7e).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x" + String(byte, radix: 16, uppercase: true)
        }
        func valueEnded(at end: Int) {
            if collect, stack.count == 1, let key = pendingKey {
                members.append(Member(key: key, value: valueStart..<end)); pendingKey = nil
            }
            expect = stack.isEmpty ? .value : .commaOrEnd
            if stack.isEmpty { sawValue = true }
        }
        func grammar(_ at: Int, _ message: String) -> Problem { Problem(kind: .grammar, offset: at, message: message) }

        while i < b.count {
            let c = b[i]
            if c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { i += 1; continue }
            if sawValue { throw grammar(i, "text after the JSON value (\(describe(c)) at byte \(i))") }
            let comma = afterComma
            afterComma = false
            switch expect {
            case .colon:
                guard c == UInt8(ascii: ":") else { throw grammar(i, "expected ':' after a key, found \(describe(c)) at byte \(i)") }
                expect = .value; i += 1
            case .commaOrEnd:
                let top = stack[stack.count - 1]
                if c == UInt8(ascii: ",") { expect = top.kind == .object ? .key : .value; afterComma = true; i += 1; continue }
                let close = top.kind == .object ? UInt8(ascii: "}") : UInt8(ascii: "]")
                guard c == close else {
                    throw grammar(i, "expected ',' or '\(Character(Unicode.Scalar(close)))' in the \(top.kind == .object ? "object" : "array") opened at byte \(top.opened), found \(describe(c)) at byte \(i)")
                }
                stack.removeLast(); i += 1; valueEnded(at: i)
            case .key:
                guard c == UInt8(ascii: "\"") else {
                    if comma, c == UInt8(ascii: "}") { throw grammar(i, "a comma before '}' at byte \(i); JSON has no comma after the last member") }
                    throw grammar(i, "expected a key (a string in double quotes) in the object opened at byte \(stack[stack.count - 1].opened), found \(describe(c)) at byte \(i)")
                }
                let start = i
                i = try string(b, from: i, judging: judgeValues, &valueProblem)
                if collect, stack.count == 1 { pendingKey = JSONDuplicateKeys.unescaped(Array(b[(start + 1)..<(i - 1)])) }
                expect = .colon
            case .value:
                if stack.count == 1 { valueStart = i }
                switch c {
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    stack.append((c == UInt8(ascii: "{") ? .object : .array, i)); i += 1
                    // An empty container closes at once; else a key or a value comes.
                    var j = i
                    while j < b.count, b[j] == 0x20 || b[j] == 0x09 || b[j] == 0x0A || b[j] == 0x0D { j += 1 }
                    if j < b.count, b[j] == (c == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                        stack.removeLast(); i = j + 1; valueEnded(at: i)
                    } else {
                        expect = c == UInt8(ascii: "{") ? .key : .value
                    }
                case UInt8(ascii: "\""):
                    i = try string(b, from: i, judging: judgeValues, &valueProblem); valueEnded(at: i)
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    i = try number(b, from: i, judging: judgeValues, &valueProblem); valueEnded(at: i)
                case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                    let word: [UInt8] = c == UInt8(ascii: "t") ? Array("true".utf8) : c == UInt8(ascii: "f") ? Array("false".utf8) : Array("null".utf8)
                    guard b.count >= i + word.count, b[i..<(i + word.count)].elementsEqual(word) else {
                        throw grammar(i, "expected a value at byte \(i) (\(String(decoding: word, as: UTF8.self))?)")
                    }
                    i += word.count; valueEnded(at: i)
                default:
                    if comma, c == UInt8(ascii: "]") { throw grammar(i, "a comma before ']' at byte \(i); JSON has no comma after the last element") }
                    let hint = c == UInt8(ascii: "'") ? "; JSON strings take double quotes" : (c == UInt8(ascii: "+") || c == UInt8(ascii: ".")) ? "; a JSON number starts with a digit or '-'" : ""
                    throw grammar(i, "expected a value, found \(describe(c)) at byte \(i)\(hint)")
                }
            }
        }
        if let open = stack.last {
            throw grammar(b.count, "the text ends inside the \(open.kind == .object ? "object" : "array") opened at byte \(open.opened)")
        }
        if !sawValue { throw grammar(b.count, "the text holds no JSON value (it is empty or only whitespace)") }
        if let valueProblem { throw valueProblem }
        return members
    }

    /// The offset after the string that opens at `start` (its quote). A `\u` escape of half a
    /// surrogate pair is noted in `valueProblem` (the first only) when `judging`.
    private static func string(_ b: [UInt8], from start: Int, judging: Bool, _ valueProblem: inout Problem?) throws(Problem) -> Int {
        func hexValue(_ j: Int) -> Int? {
            guard j + 4 <= b.count else { return nil }
            var v = 0
            for k in j..<(j + 4) {
                let h = b[k]
                switch h {
                case 0x30...0x39: v = v * 16 + Int(h - 0x30)
                case 0x41...0x46: v = v * 16 + Int(h - 0x41 + 10)
                case 0x61...0x66: v = v * 16 + Int(h - 0x61 + 10)
                default: return nil
                }
            }
            return v
        }
        var i = start + 1
        var highAt: Int?  // a high surrogate's escape just before, waiting for its low half
        func halfPair(_ at: Int) {
            if judging, valueProblem == nil {
                valueProblem = Problem(kind: .halfSurrogatePair, offset: at,
                                       message: "a \\u escape of half a UTF-16 surrogate pair at byte \(at) (\\ud800…\\udfff not in a high-low pair); JSON strings must be Unicode text")
            }
        }
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                if let h = highAt { halfPair(h) }
                return i + 1
            }
            if c < 0x20 {
                throw Problem(kind: .grammar, offset: i, message: "a control character (U+00\(c < 0x10 ? "0" : "")\(String(c, radix: 16, uppercase: true))) inside the string opened at byte \(start), at byte \(i); JSON writes it as an escape (\\n, \\t, \\u00XX)")
            }
            if c == UInt8(ascii: "\\") {
                guard i + 1 < b.count else { break }
                switch b[i + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    if let h = highAt { halfPair(h); highAt = nil }
                    i += 2
                case UInt8(ascii: "u"):
                    guard let v = hexValue(i + 2) else {
                        throw Problem(kind: .grammar, offset: i, message: "a \\u escape at byte \(i) needs four hex digits (\\u00e9)")
                    }
                    if (0xDC00...0xDFFF).contains(v) {
                        if highAt == nil { halfPair(i) }
                        highAt = nil
                    } else {
                        if let h = highAt { halfPair(h) }
                        highAt = (0xD800...0xDBFF).contains(v) ? i : nil
                    }
                    i += 6
                default:
                    throw Problem(kind: .grammar, offset: i, message: "\\\(Character(Unicode.Scalar(b[i + 1] < 0x80 ? b[i + 1] : 0x3F))) at byte \(i) is not a JSON escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)")
                }
                continue
            }
            if let h = highAt { halfPair(h); highAt = nil }
            i += 1
        }
        throw Problem(kind: .grammar, offset: b.count, message: "the text ends inside the string opened at byte \(start)")
    }

    /// The offset after the number that starts at `start`: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    /// One beyond a 64-bit float is noted in `valueProblem` (the first only) when `judging`.
    private static func number(_ b: [UInt8], from start: Int, judging: Bool, _ valueProblem: inout Problem?) throws(Problem) -> Int {
        func digit(_ j: Int) -> Bool { j < b.count && b[j] >= 0x30 && b[j] <= 0x39 }
        func bad() -> Problem {
            Problem(kind: .grammar, offset: start,
                    message: "a malformed number at byte \(start) (JSON numbers: -?digits[.digits][e[+-]digits], no leading zero, no '+')")
        }
        var i = start
        if b[i] == UInt8(ascii: "-") { i += 1 }
        guard digit(i) else { throw bad() }
        if b[i] == UInt8(ascii: "0") { i += 1; if digit(i) { throw bad() } } else { while digit(i) { i += 1 } }
        var plain = true
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1; guard digit(i) else { throw bad() }
            while digit(i) { i += 1 }
        }
        if i < b.count, b[i] | 0x20 == UInt8(ascii: "e") {
            plain = false
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard digit(i) else { throw bad() }
            while digit(i) { i += 1 }
        }
        // Only a long number or one with an exponent can pass ±1.8e308.
        if judging, valueProblem == nil, !plain || i - start > 300,
           let d = Double(String(decoding: b[start..<i], as: UTF8.self)), d.isInfinite {
            valueProblem = Problem(kind: .numberBeyondDouble, offset: start,
                                   message: "a number beyond ±1.8e308 (what a 64-bit float holds) at byte \(start)")
        }
        return i
    }
}
