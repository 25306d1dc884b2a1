/// A small JSON5 reader that remembers the line of every key, so config errors can name the file,
/// line and key (Foundation's JSON5 decoder reports neither line nor key for syntax errors).
///
/// Accepts: `//` and `/* */` comments, unquoted identifier keys, single- or double-quoted strings,
/// trailing commas, hexadecimal and leading-`+` numbers. Produces ``ConfigValue``.
public indirect enum ConfigValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([ConfigValue])
    /// Members in file order, each with the line its key is on (1-based).
    case object([(key: String, line: Int, value: ConfigValue)])

    public static func == (a: ConfigValue, b: ConfigValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.number(x), .number(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    /// The member named `key` of an object (the last one if repeated).
    public subscript(key: String) -> ConfigValue? {
        if case let .object(m) = self { return m.last { $0.key == key }?.value }
        return nil
    }
}

/// A syntax error at a line and column (1-based).
public struct JSON5SyntaxError: Error, Sendable, Equatable {
    public var line: Int
    public var column: Int
    public var message: String
}

public enum JSON5 {
    /// The most levels of arrays and objects a document may nest (config files need about 5).
    /// Without a bound, a file nested 40,000 deep overflowed the parser's stack (issue 7, hole 3).
    public static let maximumDepth = 32

    /// Parses a whole JSON5 document.
    /// - Throws: ``JSON5SyntaxError`` naming line and column (also for nesting deeper than
    ///   ``maximumDepth``).
    public static func parse(_ text: String) throws(JSON5SyntaxError) -> ConfigValue {
        var p = Parser(Array(text.utf8))
        p.skipSpace()
        let v = try p.value()
        p.skipSpace()
        if p.i < p.b.count { throw p.error("unexpected text after the end of the document") }
        return v
    }

    struct Parser {
        let b: [UInt8]
        var i = 0
        var line = 1
        var lineStart = 0
        /// Arrays and objects open at `i`.
        var depth = 0
        init(_ b: [UInt8]) { self.b = b }

        /// Enters an array or object, refusing one level more than ``JSON5/maximumDepth``.
        mutating func enter() throws(JSON5SyntaxError) {
            depth += 1
            if depth > JSON5.maximumDepth { throw error("nested more than \(JSON5.maximumDepth) levels deep") }
            advance()
        }

        func error(_ m: String) -> JSON5SyntaxError { JSON5SyntaxError(line: line, column: i - lineStart + 1, message: m) }
        var peek: UInt8? { i < b.count ? b[i] : nil }
        mutating func advance() {
            if b[i] == UInt8(ascii: "\n") { line += 1; lineStart = i + 1 }
            i += 1
        }

        mutating func skipSpace() {
            while let c = peek {
                if c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d { advance(); continue }
                if c == UInt8(ascii: "/"), i + 1 < b.count {
                    if b[i + 1] == UInt8(ascii: "/") { while let d = peek, d != 0x0a { _ = d; advance() }; continue }
                    if b[i + 1] == UInt8(ascii: "*") {
                        advance(); advance()
                        while i < b.count, !(b[i] == UInt8(ascii: "*") && i + 1 < b.count && b[i + 1] == UInt8(ascii: "/")) { advance() }
                        if i < b.count { advance(); advance() }
                        continue
                    }
                }
                break
            }
        }

        mutating func value() throws(JSON5SyntaxError) -> ConfigValue {
            guard let c = peek else { throw error("unexpected end of file, expected a value") }
            switch c {
            case UInt8(ascii: "{"): return try object()
            case UInt8(ascii: "["): return try array()
            case UInt8(ascii: "\""), UInt8(ascii: "'"): return .string(try string())
            case UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default:
                let word = identifier()
                switch word {
                case "true": return .bool(true)
                case "false": return .bool(false)
                case "null": return .null
                case "NaN", "Infinity":
                    // JSON5 allows them, but no config value may be one: every number has a range.
                    throw error("\(word) is not allowed here: config numbers are finite")
                case "": throw error("unexpected character '\(Character(Unicode.Scalar(c)))', expected a value")
                default: throw error("unexpected word '\(word)', expected a value (strings need quotes)")
                }
            }
        }

        mutating func identifier() -> String {
            let start = i
            while let c = peek, c == UInt8(ascii: "_") || c == UInt8(ascii: "$") || (c >= 0x30 && c <= 0x39)
                    || (c | 0x20 >= 0x61 && c | 0x20 <= 0x7a) { advance() }
            return String(decoding: b[start..<i], as: UTF8.self)
        }

        mutating func object() throws(JSON5SyntaxError) -> ConfigValue {
            try enter()
            defer { depth -= 1 }
            var members: [(key: String, line: Int, value: ConfigValue)] = []
            var firstLine: [String: Int] = [:]
            while true {
                skipSpace()
                guard let c = peek else { throw error("unexpected end of file inside an object") }
                if c == UInt8(ascii: "}") { advance(); return .object(members) }
                let keyLine = line
                let keyAt = error("")  // the key's place, for a duplicate
                let key: String
                if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") { key = try string() } else {
                    key = identifier()
                    if key.isEmpty { throw error("expected a key") }
                }
                // A key given twice in one object is refused: JSON5 lets the last win, which makes a
                // typo or a pasted block silently undo an earlier setting.
                if let first = firstLine[key] {
                    throw JSON5SyntaxError(line: keyAt.line, column: keyAt.column,
                                           message: "duplicate key '\(key)' (first given on line \(first))")
                }
                firstLine[key] = keyLine
                skipSpace()
                guard peek == UInt8(ascii: ":") else { throw error("expected ':' after key '\(key)'") }
                advance(); skipSpace()
                members.append((key, keyLine, try value()))
                skipSpace()
                if peek == UInt8(ascii: ",") { advance(); continue }
                if peek == UInt8(ascii: "}") { advance(); return .object(members) }
                throw error("expected ',' or '}' after the value of '\(key)'")
            }
        }

        mutating func array() throws(JSON5SyntaxError) -> ConfigValue {
            try enter()
            defer { depth -= 1 }
            var items: [ConfigValue] = []
            while true {
                skipSpace()
                guard let c = peek else { throw error("unexpected end of file inside an array") }
                if c == UInt8(ascii: "]") { advance(); return .array(items) }
                items.append(try value())
                skipSpace()
                if peek == UInt8(ascii: ",") { advance(); continue }
                if peek == UInt8(ascii: "]") { advance(); return .array(items) }
                throw error("expected ',' or ']' in an array")
            }
        }

        mutating func string() throws(JSON5SyntaxError) -> String {
            let quote = b[i]
            advance()
            var out: [UInt8] = []
            while true {
                guard let c = peek else { throw error("unterminated string") }
                if c == quote { advance(); return String(decoding: out, as: UTF8.self) }
                if c == 0x0a { throw error("newline inside a string") }
                if c == UInt8(ascii: "\\") {
                    advance()
                    guard let e = peek else { throw error("unterminated string") }
                    advance()
                    switch e {
                    case UInt8(ascii: "n"): out.append(0x0a)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "r"): out.append(0x0d)
                    case UInt8(ascii: "u"):
                        guard i + 4 <= b.count, let v = UInt32(String(decoding: b[i..<i + 4], as: UTF8.self), radix: 16),
                              let s = Unicode.Scalar(v) else { throw error("bad \\u escape") }
                        for _ in 0..<4 { advance() }
                        out += Array(String(Character(s)).utf8)
                    default: out.append(e)
                    }
                    continue
                }
                out.append(c); advance()
            }
        }

        mutating func number() throws(JSON5SyntaxError) -> ConfigValue {
            let start = i
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { advance() }
            if let c = peek, c == UInt8(ascii: "I") || c == UInt8(ascii: "N") {
                let word = String(decoding: b[start..<i], as: UTF8.self) + identifier()
                if word.hasSuffix("Infinity") || word.hasSuffix("NaN") {
                    throw error("\(word) is not allowed here: config numbers are finite")
                }
                throw error("bad number '\(word)'")
            }
            while let c = peek, (c >= 0x30 && c <= 0x39) || c == UInt8(ascii: ".") || c == UInt8(ascii: "e")
                    || c == UInt8(ascii: "E") || c == UInt8(ascii: "x") || c == UInt8(ascii: "X")
                    || (c | 0x20 >= 0x61 && c | 0x20 <= 0x66) || ((c == UInt8(ascii: "+") || c == UInt8(ascii: "-")) && (b[i - 1] | 0x20) == UInt8(ascii: "e")) { advance() }
            var text = String(decoding: b[start..<i], as: UTF8.self)
            var sign = 1.0
            if text.hasPrefix("+") { text.removeFirst() } else if text.hasPrefix("-") { text.removeFirst(); sign = -1 }
            if text.lowercased().hasPrefix("0x"), let v = Int(text.dropFirst(2), radix: 16) { return .number(sign * Double(v)) }
            guard let v = Double(text) else { throw error("bad number '\(String(decoding: b[start..<i], as: UTF8.self))'") }
            // 1e400 reads as infinity: refused as a literal Infinity is (config numbers are finite).
            guard v.isFinite else {
                throw error("number '\(String(decoding: b[start..<i], as: UTF8.self))' is too large (config numbers are finite)")
            }
            return .number(sign * v)
        }
    }
}
