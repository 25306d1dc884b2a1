import Foundation
import Testing
@testable import InterludeWire

/// ``JSONSyntax``: where a refused line breaks JSON's grammar, in the protocol's words, and the id
/// of a well-formed line the parser refused for a value (PROTOCOL.md "Reply": `"id": null` only when
/// the id cannot be read). Strangers' finds of 2026-12-04: `"\ud83"` read Foundation's "Invalid hex
/// encoded sequence", a line ending inside a string "Unexpected end of file during JSON parse.", and
/// a half surrogate or `1e400` replied `"id": null` though the id was there.
@Suite struct JSONSyntaxTests {
    func problem(_ s: String) -> String? { JSONSyntax.problem(in: Array(s.utf8))?.message }

    @Test("each break of the grammar is named with its byte", arguments: [
        (#"{"id":1,"method":"sta"#, "the text ends inside the string opened at byte 17"),
        (#"{"id":1,"method":"status""#, "the text ends inside the object opened at byte 0"),
        (#"{"id":1,"p":[1,2"#, "the text ends inside the array opened at byte 12"),
        (#"{"id":1,"t":"\ud83"}"#, #"a \u escape at byte 13 needs four hex digits (\u00e9)"#),
        (#"{"id":1,"t":"a\qb"}"#, #"\q at byte 14 is not a JSON escape (\" \\ \/ \b \f \n \r \t \uXXXX)"#),
        ("{\"id\":1,\"t\":\"a\tb\"}", #"a control character (U+0009) inside the string opened at byte 12, at byte 14; JSON writes it as an escape (\n, \t, \u00XX)"#),
        (#"{"id":01}"#, "a malformed number at byte 6 (JSON numbers: -?digits[.digits][e[+-]digits], no leading zero, no '+')"),
        (#"{"id":1.}"#, "a malformed number at byte 6 (JSON numbers: -?digits[.digits][e[+-]digits], no leading zero, no '+')"),
        (#"{"id":+1}"#, "expected a value, found '+' at byte 6; a JSON number starts with a digit or '-'"),
        (#"{'id':1}"#, "expected a key (a string in double quotes) in the object opened at byte 0, found ''' at byte 1"),
        (#"{"id":'a'}"#, "expected a value, found ''' at byte 6; JSON strings take double quotes"),
        (#"{"id" 1}"#, "expected ':' after a key, found '1' at byte 6"),
        (#"{"id":1 "m":2}"#, "expected ',' or '}' in the object opened at byte 0, found '\"' at byte 8"),
        (#"{"id":1,}"#, "a comma before '}' at byte 8; JSON has no comma after the last member"),
        (#"[1, ]"#, "a comma before ']' at byte 4; JSON has no comma after the last element"),
        (#"{"a":[,]}"#, "expected a value, found ',' at byte 6"),
        ("\u{FEFF}{\"id\":01}", "a malformed number at byte 9 (JSON numbers: -?digits[.digits][e[+-]digits], no leading zero, no '+')"),
        (#"{"id":tru}"#, "expected a value at byte 6 (true?)"),
        (#"{"id":1}}"#, "text after the JSON value ('}' at byte 8)"),
        (#"{"id":1} {"id":2}"#, "text after the JSON value ('{' at byte 9)"),
        ("   ", "the text holds no JSON value (it is empty or only whitespace)"),
    ])
    func grammarBreaks(line: String, said: String) {
        #expect(problem(line) == said)
        // And the parser agrees that it is not JSON, but for a comma before the end (it reads
        // `{"id":1,}`; such a line never reaches JSONSyntax in the daemon).
        if !said.hasPrefix("a comma before") {
            #expect((try? JSONValue.parse(Data(line.utf8))) == nil, "\(line)")
        }
    }

    @Test("well-formed text is not a problem", arguments: [
        #"{"id":1,"method":"status"}"#, #" {"a":[],"b":{},"c":[{}],"d":-0.5e+3,"e":"\u00e9\n","f":null,"g":true,"h":false} "#,
        #""fragment""#, "0", #"[[[]]]"#, "{\"a\":\"é🎵\"}", #"{"pair":"\ud83c\udfb5","max":1.7976931348623157e308,"tiny":1e-400}"#,
        "\u{FEFF}{\"id\":1}",  // a byte order mark before the text (RFC 8259 §8.1: a parser may ignore it)
    ])
    func wellFormed(line: String) {
        #expect(problem(line) == nil, "\(line)")
    }

    @Test("a well-formed text's value no reader takes is named with its byte, after any break of the grammar", arguments: [
        (#"{"t":"\ud800"}"#, JSONSyntax.Problem.Kind.halfSurrogatePair, 6),
        (#"{"t":"ok\udc00"}"#, .halfSurrogatePair, 8),
        (#"{"t":"\ud83d\ud83d\ude00"}"#, .halfSurrogatePair, 6),
        (#"{"t":"\ud83dx"}"#, .halfSurrogatePair, 6),
        (#"{"n":1e400,"t":"\ud800"}"#, .numberBeyondDouble, 5),
        (#"{"n":-2e308}"#, .numberBeyondDouble, 5),
        (#"{"t":"\ud800","n":01}"#, .grammar, 18),   // broken: the break is named, not the value before it
        (#"{"t":"\ud800","#, .grammar, 14),
    ])
    func valuesNoReaderTakes(line: String, kind: JSONSyntax.Problem.Kind, at: Int) {
        let p = JSONSyntax.problem(in: Array(line.utf8))
        #expect(p?.kind == kind && p?.offset == at, "\(String(describing: p))")
        #expect((try? JSONValue.parse(Data(line.utf8))) == nil, "the parser refuses it too: \(line)")
    }

    @Test func topLevelMembersAreTheOuterObjectsKeysWithTheirValuesText() {
        let line = #"{"id":"r\u0031","params":{"id":2,"x":[3]},"id":4}"#
        let bytes = Array(line.utf8)
        let members = JSONSyntax.topLevelMembers(of: bytes).map { ($0.key, String(decoding: bytes[$0.value], as: UTF8.self)) }
        #expect(members.map(\.0) == ["id", "params", "id"])
        #expect(members.map(\.1) == [#""r\u0031""#, #"{"id":2,"x":[3]}"#, "4"])
        #expect(JSONSyntax.topLevelMembers(of: Array(#"{"id":1"#.utf8)).isEmpty, "not well-formed: nothing is read")
        #expect(JSONSyntax.topLevelMembers(of: Array(#"[{"id":1}]"#.utf8)).isEmpty, "not an object")
    }

    /// Against the parser: what it reads is no problem here (but a comma before the end, which it
    /// reads); what it refuses is a problem here, a break of the grammar or a value no reader takes.
    @Test func agreesWithTheParserOnRandomLines() {
        var rng = SystemRandomNumberGenerator()
        let pieces = ["{", "}", "[", "]", ",", ":", "\"", "\"a\"", "\"id\"", "1", "-", "0", ".5", "e9", "1e400", "true", "nul", " ",
                      "\\", "\\u", "\\ud800", "\\udc00", "\\u00e9", "\\n", "\t", "é", "'"]
        var disagreements: [String] = []
        for _ in 0..<20_000 {
            let line = (0..<Int.random(in: 1...12, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            let parsed = (try? JSONValue.parse(Data(line.utf8))) != nil
            let found = JSONSyntax.problem(in: Array(line.utf8))
            let trailingComma = found?.message.hasPrefix("a comma before") == true
            if parsed != (found == nil), !(parsed && trailingComma) {
                disagreements.append(line)
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(10))")
    }
}
