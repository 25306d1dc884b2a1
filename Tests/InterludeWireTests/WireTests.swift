import Foundation
import InterludeTestSupport
import Testing
import InterludeWire
import InterludePolicy

@Suite struct FramingTests {
    let lines: [String] = [
        #"{"id":1,"method":"hello","params":{"app":"org.example.Music"}}"#,
        #"{"id":2,"method":"status"}"#,
        #"{"id":"x","method":"session.register","params":{"category":"playback","options":["duckOthers"]}}"#,
        "{\"id\":3,\"method\":\"sound.play\",\"params\":{\"sound\":\"caf\u{e9} \u{1F514}\"}}",
    ]
    var stream: [UInt8] { Array(lines.map { $0 + "\n" }.joined().utf8) }

    func feed(_ chunks: [[UInt8]]) throws -> [String] {
        var f = LineFramer()
        return try chunks.flatMap { try f.feed($0) }.map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func allAtOnce() throws { #expect(try feed([stream]) == lines) }
    @Test func oneByteAtATime() throws { #expect(try feed(stream.map { [$0] }) == lines) }
    @Test(arguments: 1...20) func randomSplits(seed: Int) throws {
        var rng = SplitMix(seed: UInt64(seed))
        var chunks: [[UInt8]] = []
        var rest = stream[...]
        while !rest.isEmpty {
            let n = min(rest.count, Int(rng.next() % 17) + 1)
            chunks.append(Array(rest.prefix(n))); rest = rest.dropFirst(n)
        }
        #expect(try feed(chunks) == lines)
    }
    @Test func crlfIsAccepted() throws { #expect(try feed([Array("{\"a\":1}\r\n".utf8)]) == ["{\"a\":1}"]) }
    @Test func partialLineIsKept() throws {
        var f = LineFramer()
        #expect(try f.feed(Array("{\"id\":1".utf8)).isEmpty)
        #expect(f.pendingBytes == 7)
        #expect(try f.feed(Array("}\n".utf8)).map { String(decoding: $0, as: UTF8.self) } == ["{\"id\":1}"])
    }
    @Test func lineOverCapIsRefusedEvenWithoutNewline() {
        var f = LineFramer()
        #expect(throws: LineFramer.Overflow.self) { try f.feed([UInt8](repeating: 0x61, count: 64 * 1024 + 1)) }
        var g = LineFramer()
        #expect(throws: LineFramer.Overflow.self) {
            for _ in 0..<100 { _ = try g.feed([UInt8](repeating: 0x61, count: 1024)) }
        }
    }
    @Test func trailingCRCountsTowardTheCap() {
        var f = LineFramer()
        #expect(throws: LineFramer.Overflow.self) { try f.feed([UInt8](repeating: 0x61, count: 64 * 1024) + [0x0d, 0x0a]) }
    }
    @Test func lineAtCapIsAccepted() throws {
        var f = LineFramer()
        let out = try f.feed([UInt8](repeating: 0x61, count: 64 * 1024) + [0x0a])
        #expect(out.count == 1 && out[0].count == 64 * 1024)
    }
}

@Suite struct RequestParsingTests {
    func parse(_ s: String) -> Result<WireRequest, WireParseError> {
        do { return .success(try WireRequest.parse(Array(s.utf8))) } catch { return .failure(error) }
    }
    func code(_ s: String) -> WireErrorCode? {
        if case let .failure(e) = parse(s) { return e.error.code } else { return nil }
    }

    @Test func validRequest() throws {
        let r = try WireRequest.parse(Array(#"{"id":7,"method":"session.activate","params":{"session":"s1","acceptsDelay":true}}"#.utf8))
        #expect(r.id == .number(7))
        let p = try r.decodeParams(ActivateParams.self)
        #expect(p == ActivateParams(session: AudioSessionID("s1"), acceptsDelay: true))
    }
    @Test(arguments: [
        ("not json", WireErrorCode.badRequest), ("[1,2]", .badRequest), (#"{"method":"status"}"#, .badRequest),
        (#"{"id":1}"#, .badRequest), (#"{"id":1,"method":5}"#, .badRequest), (#"{"id":1,"method":"x","params":[]}"#, .badRequest),
        (#"{"id":1,"method":"status","extra":true}"#, .unknownField), (#"{"id":{},"method":"status"}"#, .badRequest),
    ])
    func malformedLinesGetStableCodes(line: String, expected: WireErrorCode) {
        #expect(code(line) == expected)
    }
    /// An id past 2^53 − 1 would be echoed as another number (a double's nearest): refused, with
    /// no id in the reply (a stranger's find); the largest exact one is echoed as sent.
    @Test func idsPastTwoToThe53AreRefusedNotEchoedAsAnotherNumber() throws {
        for big in ["9007199254740993", "-9007199254740993", "1e300", "18446744073709551616"] {
            if case let .failure(e) = parse(#"{"id":\#(big),"method":"status"}"#) {
                #expect(e.id == nil)
                #expect(e.error.code == .badRequest && e.error.message.contains("2^53"), "\(big): \(e.error.message)")
            } else { Issue.record("accepted id \(big)") }
        }
        let r = try WireRequest.parse(Array(#"{"id":9007199254740991,"method":"status"}"#.utf8))
        #expect(String(decoding: try WireCoding.encode(r.id), as: UTF8.self) == "9007199254740991")
    }

    @Test func idIsEchoedWhenReadable() {
        if case let .failure(e) = parse(#"{"id":9,"method":"status","bogus":1}"#) { #expect(e.id == .number(9)) }
        else { Issue.record("expected failure") }
    }
    @Test func unknownParamIsRefusedByName() throws {
        let r = try WireRequest.parse(Array(#"{"id":1,"method":"session.register","params":{"category":"playback","colour":"red"}}"#.utf8))
        #expect(throws: WireError.self) { try r.decodeParams(RegisterParams.self) }
        do { _ = try r.decodeParams(RegisterParams.self) } catch {
            #expect(error.code == .unknownField)
            #expect(error.message.contains("colour"))
        }
    }
    @Test func aParamToAMethodWithoutParamsSaysItTakesNone() throws {
        let r = try WireRequest.parse(Array(#"{"id":1,"method":"status","params":{"verbose":true}}"#.utf8))
        do { _ = try r.decodeParams(StatusParams.self); Issue.record("accepted") } catch {
            #expect(error.code == .unknownField)
            #expect(error.message == #"status has no param "verbose" (it takes none)"#)
        }
    }
    @Test("unknown keys inside trigger, calendar, categories and actions are refused by their path",
          arguments: [
            (#"{"title":"t","trigger":{"in":5,"every":3}}"#, "trigger.every"),
            (#"{"title":"t","trigger":{"calendar":{"hour":9,"minutes":30}}}"#, "trigger.calendar.minutes"),
          ])
    func unknownNestedParamIsRefusedByPath(params: String, path: String) throws {
        let r = try WireRequest.parse(Array(#"{"id":1,"method":"notification.add","params":\#(params)}"#.utf8))
        do { _ = try r.decodeParams(AddNotificationParams.self); Issue.record("accepted") } catch {
            #expect(error.code == .unknownField)
            #expect(error.message.contains("\"\(path)\""), "\(error.message)")
        }
    }
    @Test func unknownKeysInCategoriesAndActionsAreRefusedButUserInfoIsFreeForm() throws {
        let bad = try WireRequest.parse(Array(#"{"id":1,"method":"notification.registerCategories","params":{"categories":[{"identifier":"c","actions":[{"identifier":"a","title":"A","options":[]},{"identifier":"b","title":"B","options":[],"colour":"red"}]}]}}"#.utf8))
        do { _ = try bad.decodeParams(RegisterCategoriesParams.self); Issue.record("accepted") } catch {
            #expect(error.code == .unknownField)
            // Named by where it is, as a wrong value is (it read "categories[].actions[].colour").
            #expect(error.message.contains(#"has no param "categories.0.actions.1.colour""#), "\(error.message)")
        }
        let wrong = try WireRequest.parse(Array(#"{"id":1,"method":"notification.registerCategories","params":{"categories":[{"identifier":"c","actions":[{"identifier":"a","title":"A","options":[]},{"identifier":"b","title":7,"options":[]}]}]}}"#.utf8))
        do { _ = try wrong.decodeParams(RegisterCategoriesParams.self); Issue.record("accepted") } catch {
            #expect(error.code == .badRequest)
            #expect(error.message.contains("categories.0.actions.1.title"), "\(error.message)")
        }
        let ok = try WireRequest.parse(Array(#"{"id":1,"method":"notification.add","params":{"title":"t","userInfo":{"any key":"its value"},"trigger":{"in":5}}}"#.utf8))
        #expect(throws: Never.self) { _ = try ok.decodeParams(AddNotificationParams.self) }
    }
    @Test func errorsSpeakJSONNotSwift() throws {
        if case let .failure(e) = parse("this is not json") { #expect(!e.error.message.contains("DecodingError"), "\(e.error.message)") }
        else { Issue.record("accepted") }
        if case let .failure(e) = parse(#"{"id":1e400,"method":"status"}"#) { #expect(!e.error.message.contains("Dictionary<"), "\(e.error.message)") }
        else { Issue.record("accepted") }
        // Valid JSON beyond a 64-bit float: said in the protocol's words, not Foundation's ("is not
        // representable in Swift").
        if case let .failure(e) = parse(#"{"id":1,"method":"notification.add","params":{"trigger":{"in":1e400}}}"#) {
            #expect(e.error.message == "a request holds a number beyond ±1.8e308 (what a 64-bit float holds) at byte 62", "\(e.error.message)")
        } else { Issue.record("accepted") }
        // Half a surrogate pair (a stranger's find): Foundation said "Unexpected end of file" for
        // a line that went on; said in the protocol's words, a high half and a low half alone.
        for (half, at) in [(#"\ud800"#, 55), (#"x\ud83d\u0041"#, 56), (#"\udc00x"#, 55)] {
            if case let .failure(e) = parse(#"{"id":1,"method":"notification.add","params":{"title":""# + half + #""}}"#) {
                #expect(e.error.message == #"a request holds a \u escape of half a UTF-16 surrogate pair at byte "# + "\(at)" + #" (\ud800…\udfff not in a high-low pair); JSON strings must be Unicode text"#,
                        "\(e.error.message)")
            } else { Issue.record("accepted \(half)") }
        }
        // The refusals above are of well-formed lines: the id is echoed (it was null).
        for line in [#"{"id":"r1","method":"notification.add","params":{"title":"\ud800"}}"#,
                     #"{"method":"notification.add","params":{"trigger":{"in":1e400}},"id":"r1"}"#] {
            if case let .failure(e) = parse(line) { #expect(e.id == .string("r1"), "\(line)") } else { Issue.record("accepted \(line)") }
        }
        // Not echoed: an id that is itself unreadable, given twice, or in a broken line.
        for line in [#"{"id":"\ud800","method":"status"}"#, #"{"id":1e400,"method":"status"}"#,
                     #"{"id":1,"id":2,"method":"status","params":{"t":"\ud800"}}"#, #"{"id":1,"method":"sta"#] {
            if case let .failure(e) = parse(line) { #expect(e.id == nil, "\(line)") } else { Issue.record("accepted \(line)") }
        }
        // A comma before the end is no JSON, though Foundation reads it (a stranger's find): refused,
        // id null as for every break of the grammar; a byte order mark before the text is ignored
        // (RFC 8259 §8.1); text that is not UTF-8 is named with its byte.
        for (line, said) in [(#"{"id":6,"method":"status",}"#, "not valid JSON: a comma before '}' at byte 26; JSON has no comma after the last member"),
                             (#"{"id":7,"method":"status","params":{"a":[1,]}}"#, "not valid JSON: a comma before ']' at byte 43; JSON has no comma after the last element"),
                             (#"[1,2,]"#, "not valid JSON: a comma before ']' at byte 5; JSON has no comma after the last element")] {
            if case let .failure(e) = parse(line) {
                #expect(e.error.message == said && e.id == nil, "\(e.error.message) id \(String(describing: e.id))")
            } else { Issue.record("accepted \(line)") }
        }
        if case let .success(r) = parse("\u{FEFF}" + #"{"id":8,"method":"status"}"#) { #expect(r.id == .number(8)) } else { Issue.record("a BOM refused") }
        do { _ = try WireRequest.parse(Array(#"{"id":9,"t":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)); Issue.record("accepted") } catch {
            #expect(error.error.message == "not valid JSON: not UTF-8 text (at byte 13)", "\(error.error.message)")
        }
        // A broken line says where, in the protocol's words (it read Foundation's "Unexpected end of file").
        if case let .failure(e) = parse(#"{"id":1,"method":"sta"#) {
            #expect(e.error.message == "not valid JSON: the text ends inside the string opened at byte 17", "\(e.error.message)")
        }
        if case let .success(r) = parse(#"{"id":1,"method":"notification.add","params":{"title":"\ud83c\udfb5"}}"#) {
            #expect(r.params["title"] == .string("🎵"), "a whole pair is one character")
        } else { Issue.record("a whole pair refused") }
        let volume = try WireRequest.parse(Array(#"{"id":1,"method":"sound.play","params":{"sound":"default","volume":"loud"}}"#.utf8))
        do { _ = try volume.decodeParams(SoundPlayParams.self); Issue.record("accepted") } catch {
            #expect(error.message.contains("\"volume\" must be a number"), "\(error.message)")
        }
        if case let .failure(e) = parse(String(decoding: [0xff, 0xfe, 0x7b, 0x7d], as: UTF8.self)) { #expect(e.error.code == .badRequest) }
        let category = try WireRequest.parse(Array(#"{"id":1,"method":"session.register","params":{"category":"Ambient"}}"#.utf8))
        do { _ = try category.decodeParams(RegisterParams.self); Issue.record("accepted") } catch {
            #expect(error.message.contains("unknown value \"Ambient\" (one of: ambient, soloAmbient"), "\(error.message)")
        }
        // A huge number where a string belongs is of the wrong kind, not out of range (a stranger's find).
        let title = try WireRequest.parse(Array(#"{"id":1,"method":"notification.add","params":{"title":1e300}}"#.utf8))
        do { _ = try title.decodeParams(AddNotificationParams.self); Issue.record("accepted") } catch {
            #expect(error.message == #"notification.add: param "title" must be a string"#, "\(error.message)")
        }
        let sound = try WireRequest.parse(Array(#"{"id":1,"method":"sound.play","params":{"sound":-1e20}}"#.utf8))
        do { _ = try sound.decodeParams(SoundPlayParams.self); Issue.record("accepted") } catch {
            #expect(error.message == #"sound.play: param "sound" must be a string"#, "\(error.message)")
        }
        let year = try WireRequest.parse(Array(#"{"id":1,"method":"notification.add","params":{"title":"t","trigger":{"calendar":{"year":1e300}}}}"#.utf8))
        do { _ = try year.decodeParams(AddNotificationParams.self); Issue.record("accepted") } catch {
            #expect(error.message.contains("\"trigger.calendar.year\" is out of range"), "\(error.message)")
        }
        // A stranger's find: weekday 8 was "must be a string", though 1…7 are taken.
        let weekday = try WireRequest.parse(Array(#"{"id":1,"method":"notification.add","params":{"title":"t","trigger":{"calendar":{"weekday":8}}}}"#.utf8))
        do { _ = try weekday.decodeParams(AddNotificationParams.self); Issue.record("accepted weekday 8") } catch {
            #expect(error.message.contains("1…7") && !error.message.contains("must be a string"), "\(error.message)")
        }
        // A stranger's find: 1.5 was "must be a string", though 0…3 are taken.
        for bad in ["1.5", "7", "true"] {
            let level = try WireRequest.parse(Array(#"{"id":1,"method":"notification.add","params":{"title":"t","level":\#(bad)}}"#.utf8))
            do { _ = try level.decodeParams(AddNotificationParams.self); Issue.record("accepted \(bad)") } catch {
                #expect(error.code == .badRequest)
                #expect(error.message.contains("0…3") && !error.message.contains("must be a string"), "\(bad): \(error.message)")
            }
        }
        // A stranger's find: a fractional badge said "params do not have the expected types",
        // naming no key (Foundation's decoder reports it at no path). The fraction in a number
        // param beside it (relevance 0.5) is not blamed; of two misplaced, the first is named.
        for (params, key, value) in [(#""count":1.5"#, "count", "1.5")] {
            let r = try WireRequest.parse(Array(#"{"id":1,"method":"notification.setBadge","params":{\#(params)}}"#.utf8))
            do { _ = try r.decodeParams(SetBadgeParams.self); Issue.record("accepted \(params)") } catch {
                #expect(error.code == .badRequest)
                #expect(error.message.contains("param \"\(key)\" must be a whole number, not \(value)"), "\(error.message)")
            }
        }
        for (params, key, value) in [(#""badge":2.5,"relevance":0.5"#, "badge", "2.5"),
                                     (#""relevance":0.25,"badge":7.75,"criticalVolume":0.5,"level":1"#, "badge", "7.75")] {
            let r = try WireRequest.parse(Array(#"{"id":1,"method":"notification.add","params":{"title":"t",\#(params)}}"#.utf8))
            do { _ = try r.decodeParams(AddNotificationParams.self); Issue.record("accepted \(params)") } catch {
                #expect(error.message.contains("param \"\(key)\" must be a whole number, not \(value)"), "\(params): \(error.message)")
            }
        }
        // Thousands of fractions in free-form userInfo beside the bad badge: the search is bounded
        // (a few decodes, not one per fraction), and the reply is the plain message.
        let many = (0..<5000).map { "\"k\($0)\":0.5" }.joined(separator: ",")
        let flood = try WireRequest.parse(Array(#"{"id":1,"method":"notification.add","params":{"title":"t","badge":1.5,"userInfo":{\#(many)}}}"#.utf8))
        do { _ = try flood.decodeParams(AddNotificationParams.self); Issue.record("accepted") } catch {
            // Past 16 fractions the search is not made (it would have named "badge").
            #expect(error.code == .badRequest && !error.message.contains("\"badge\""), "\(error.message)")
        }
        let badge = try WireRequest.parse(Array(#"{"id":1,"method":"notification.setBadge","params":{"count":9223372036854775807}}"#.utf8))
        do { _ = try badge.decodeParams(SetBadgeParams.self); Issue.record("accepted") } catch {
            #expect(error.code == .badRequest)
            #expect(error.message.contains("\"count\" is out of range (no number of the protocol is beyond ±9e15)"), "\(error.message)")
        }
    }
    @Test func badEnumValueIsBadRequest() throws {
        let r = try WireRequest.parse(Array(#"{"id":1,"method":"session.register","params":{"category":"loud"}}"#.utf8))
        do { _ = try r.decodeParams(RegisterParams.self); Issue.record("accepted") } catch {
            #expect(error.code == .badRequest)
            #expect(error.message.contains("category"))
        }
    }
}

@Suite struct RoundTripTests {
    @Test func serverMessagesRoundTrip() throws {
        let msgs: [ServerMessage] = [
            .greeting(Greeting(version: "1.2.3")),
            .reply(WireReply(id: .number(1), result: try JSONValue(encoding: RegisterResult(session: AudioSessionID("s4"))))),
            .reply(WireReply(id: .string("a"), error: WireError(.insufficientPriority, "a call is active"))),
            .event(WireEvent(event: WireEventName.interruptionEnded,
                             data: try JSONValue(encoding: InterruptionEndedData(session: AudioSessionID("s1"), shouldResume: true)),
                             time: 1764500000.25)),
        ]
        for m in msgs {
            let line = try m.encoded()
            #expect(!line.contains(0x0a))
            #expect(try ServerMessage.parse(Array(line)) == m)
        }
    }
    @Test func requestRoundTrip() throws {
        let r = WireRequest(id: .number(3), method: WireMethod.soundPlay,
                            params: try JSONValue(encoding: SoundPlayParams(sound: "default", volume: 0.5)).objectValue!)
        let back = try WireRequest.parse(Array(try r.encoded()))
        #expect(back == r)
        #expect(try back.decodeParams(SoundPlayParams.self) == SoundPlayParams(sound: "default", volume: 0.5))
    }
    @Test func everyErrorCodeIsDocumented() throws {
        // PROTOCOL.md's error table must name every code (the table is the contract).
        let here = URL(fileURLWithPath: #filePath)
        let doc = try String(contentsOf: here.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("PROTOCOL.md"), encoding: .utf8)
        for c in WireErrorCode.allCases { #expect(doc.contains("`\(c.rawValue)`"), "\(c.rawValue) missing from PROTOCOL.md") }
    }
}

/// The suite's deterministic generator for split points (InterludeTestSupport).
typealias SplitMix = SplitMix64

/// Issue 7, holes 1 and 4: nesting is bounded before Foundation's decoder sees a line (it trapped
/// with SIGILL on 513 `[`, and decoding cost grew with the square of the depth).
@Suite struct NestingDepthTests {
    func parse(_ s: String) -> Result<WireRequest, WireParseError> {
        do { return .success(try WireRequest.parse(Array(s.utf8))) } catch { return .failure(error) }
    }
    func nested(_ depth: Int, open: String = "[", close: String = "]", leaf: String = "1") -> String {
        String(repeating: open, count: depth) + leaf + String(repeating: close, count: depth)
    }

    @Test("a line of 513 '[' before hello is a badRequest, not a crash")
    func brackets513() {
        guard case let .failure(e) = parse(String(repeating: "[", count: 513)) else { Issue.record("accepted"); return }
        #expect(e.error.code == .badRequest)
        #expect(e.error.message.contains("nested more than \(JSONDepth.maximum) levels"), "\(e.error.message)")
        // It is JSON, only deeper than the protocol takes (it began "not valid JSON here:").
        #expect(!e.error.message.contains("not valid JSON"), "\(e.error.message)")
    }
    @Test("params ending in 512 '[' are refused, and so is params nested 500 deep",
          arguments: [512, 500, 40_000])
    func deepParams(depth: Int) {
        let unterminated = #"{"id":1,"method":"notification.add","params":{"title":"t","userInfo":{"a":"# + String(repeating: "[", count: depth)
        let closed = #"{"id":1,"method":"notification.add","params":{"title":"t","userInfo":{"a":"# + nested(depth) + "}}}"
        for line in [unterminated, closed] {
            guard case let .failure(e) = parse(line) else { Issue.record("accepted"); continue }
            #expect(e.error.code == .badRequest)
        }
    }
    @Test("the bound counts the request itself: 32 levels pass, 33 do not")
    func exactBound() throws {
        // {"id":1,...,"params":{"a": <30 levels>}}: 2 + 30 = 32.
        let ok = #"{"id":1,"method":"status","params":{"a":"# + nested(JSONDepth.maximum - 2) + "}}"
        let r = try WireRequest.parse(Array(ok.utf8))
        #expect(r.method == "status")
        let over = #"{"id":1,"method":"status","params":{"a":"# + nested(JSONDepth.maximum - 1) + "}}"
        guard case .failure = parse(over) else { Issue.record("33 levels accepted"); return }
    }
    @Test("brackets inside strings, escaped quotes included, do not count")
    func bracketsInStrings() throws {
        let s = String(repeating: "[{", count: 600) + #"\"]"#
        let line = #"{"id":1,"method":"notification.add","params":{"title":""# + s + #""}}"#
        let r = try WireRequest.parse(Array(line.utf8))
        #expect(r.method == "notification.add")
    }
    @Test("the client refuses a daemon line nested beyond what the daemon sends")
    func clientSide() {
        #expect(throws: JSONDepth.TooDeep.self) { _ = try ServerMessage.parse(Array(String(repeating: "[", count: 600).utf8)) }
    }
}
