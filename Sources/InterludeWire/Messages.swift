import Foundation
import InterludePolicy

/// The protocol version spoken by this build. Bumped on incompatible changes.
public let interludeProtocolVersion = 1

/// The first line the daemon sends on a new connection: `{"greeting": {...}}`.
public struct Greeting: Codable, Sendable, Equatable {
    public var server: String
    public var version: String
    public var `protocol`: Int
    public init(server: String = "interluded", version: String, protocol: Int = interludeProtocolVersion) {
        self.server = server; self.version = version; self.protocol = `protocol`
    }
}

/// A request: `{"id": 1, "method": "session.activate", "params": {...}}`. `id` is a number or a
/// string chosen by the client and echoed in the reply.
public struct WireRequest: Sendable, Equatable {
    public var id: JSONValue
    public var method: String
    public var params: [String: JSONValue]

    public init(id: JSONValue, method: String, params: [String: JSONValue] = [:]) {
        self.id = id; self.method = method; self.params = params
    }

    /// One JSON object, as a request line or a remote message must be: UTF-8 text, nested at
    /// most ``JSONDepth/maximum`` levels, valid JSON, an object, no key twice in one object
    /// (``JSONDuplicateKeys``). Positions in the errors count from the start of `bytes`.
    /// - Parameter named: what the object is, for the error ("a request", "a message").
    /// - Throws: `WireError` with code `badRequest`, saying which of those failed.
    public static func jsonObject(_ bytes: [UInt8], named: String) throws(WireError) -> [String: JSONValue] {
        let obj = try jsonObjectAllowingDuplicateKeys(bytes, named: named)
        if let e = duplicateKeyError(bytes) { throw e }
        return obj
    }

    /// ``jsonObject(_:named:)`` without the duplicate-key check (a key given twice reads as its
    /// last value, as `JSONSerialization` takes it), for a reader that wants the rest of the object
    /// first: ``parse(_:)`` reads the id, to echo it with the duplicate's error.
    static func jsonObjectAllowingDuplicateKeys(_ bytes: [UInt8], named: String) throws(WireError) -> [String: JSONValue] {
        if let at = firstInvalidUTF8(bytes) {
            throw WireError(.badRequest, "not valid JSON: not UTF-8 text (at byte \(at))")
        }
        do { try JSONDepth.check(bytes) } catch {
            throw WireError(.badRequest,
                "JSON nested more than \(error.limit) levels deep (at byte \(error.offset)); the protocol allows \(error.limit)")
        }
        let value: JSONValue
        do { value = try JSONValue.parse(Data(bytes)) } catch {
            // Said in the protocol's words, with the byte (Foundation said "Unexpected end of file
            // during JSON parse." for a line that ends inside a string, and for a `\ud800` alone
            // though the line went on; "Invalid hex encoded sequence" for `\ud83"`; "Number 1e400
            // is not representable in Swift."). A break of the grammar first: a broken line is not
            // JSON, whatever it holds.
            if let problem = JSONSyntax.problem(in: bytes) {
                switch problem.kind {
                case .grammar: throw WireError(.badRequest, "not valid JSON: " + problem.message)
                case .halfSurrogatePair, .numberBeyondDouble: throw WireError(.badRequest, "\(named) holds " + problem.message)
                }
            }
            // What Foundation refused and the grammar check did not find: its own words.
            let said = (error as NSError).userInfo["NSDebugDescription"] as? String ?? "a value JSON cannot hold here"
            throw WireError(.badRequest, "not valid JSON: " + String(said.prefix(200)))
        }
        // What Foundation reads but JSON's grammar does not have (a comma before `}` or `]`).
        if let problem = JSONSyntax.problem(in: bytes), problem.kind == .grammar {
            throw WireError(.badRequest, "not valid JSON: " + problem.message)
        }
        guard let obj = value.objectValue else { throw WireError(.badRequest, "\(named) must be a JSON object") }
        return obj
    }

    /// The byte offset (0-based) where `bytes` stops being UTF-8 text, or nil when it is.
    static func firstInvalidUTF8(_ bytes: [UInt8]) -> Int? {
        guard String(validating: bytes, as: UTF8.self) == nil else { return nil }
        var parser = Unicode.UTF8.ForwardParser()
        var it = bytes.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &it) {
            case let .valid(encoded): offset += encoded.count
            case .error: return offset
            case .emptyInput: return offset
            }
        }
    }

    /// The `badRequest` for the first key given twice in one object of `bytes` (parsed JSON), or nil.
    static func duplicateKeyError(_ bytes: [UInt8]) -> WireError? {
        guard let d = JSONDuplicateKeys.first(in: bytes) else { return nil }
        return WireError(.badRequest, "key \"\(d.key)\" is given twice in one object (at byte \(d.offset)); "
                         + "each key at most once (I-JSON, RFC 7493)")
    }

    /// Parses one line. Errors carry the id when it could be read, so the reply can echo it.
    /// - Throws: ``WireParseError`` with code `badRequest` (not JSON, nested deeper than
    ///   ``JSONDepth/maximum``, not an object, no method, bad id or params type) or `unknownField` (a top-level key other than id, method, params).
    public static func parse(_ line: [UInt8]) throws(WireParseError) -> WireRequest {
        let obj: [String: JSONValue]
        do { obj = try jsonObjectAllowingDuplicateKeys(line, named: "a request") } catch { throw WireParseError(id: readableID(line), error: error) }
        let id = obj["id"]
        switch id {
        case let .number(n)? where !(abs(n) <= 9_007_199_254_740_991):
            // Past 2^53 − 1 (I-JSON's safe range, RFC 7493) a number is not read exactly: the reply
            // would echo another id, and a client matching replies by id would never see its own.
            throw WireParseError(id: nil, error: WireError(.badRequest,
                "\"id\" must be a number within ±9007199254740991 (2^53 − 1) or a string, so that the reply echoes it exactly"))
        case .number?, .string?: break
        default: throw WireParseError(id: nil, error: WireError(.badRequest, "\"id\" must be a number or a string"))
        }
        // A key given twice is refused with the id echoed, unless the id is the key given twice
        // (which of its values would the reply echo?).
        if let e = duplicateKeyError(line) {
            throw WireParseError(id: JSONDuplicateKeys.topLevelKeysGivenTwice(in: line).contains("id") ? nil : id, error: e)
        }
        if let extra = Set(obj.keys).subtracting(["id", "method", "params"]).sorted().first {
            throw WireParseError(id: id, error: WireError(.unknownField, "unknown top-level key \"\(extra)\""))
        }
        guard let method = obj["method"]?.stringValue, !method.isEmpty else {
            throw WireParseError(id: id, error: WireError(.badRequest, "\"method\" must be a non-empty string"))
        }
        var params: [String: JSONValue] = [:]
        switch obj["params"] {
        case nil, .null?: break
        case let .object(p)?: params = p
        default: throw WireParseError(id: id, error: WireError(.badRequest, "\"params\" must be an object"))
        }
        return WireRequest(id: id!, method: method, params: params)
    }

    /// The `id` of a line the parser refused, when it can still be echoed exactly: the line is UTF-8
    /// and well-formed JSON (``JSONSyntax``; refused for a value no reader takes, such as half a
    /// surrogate pair in a title or `1e400`), an object whose `id` is given once, as a string the
    /// parser reads or a number within ±(2^53 − 1). Else nil (the reply's `"id": null`).
    static func readableID(_ line: [UInt8]) -> JSONValue? {
        guard String(validating: line, as: UTF8.self) != nil else { return nil }
        let ids = JSONSyntax.topLevelMembers(of: line).filter { $0.key == "id" }
        guard ids.count == 1, let id = try? JSONValue.parse(Data(line[ids[0].value])) else { return nil }
        switch id {
        case let .number(n) where abs(n) <= 9_007_199_254_740_991: return id
        case .string: return id
        default: return nil
        }
    }

    /// Decodes the params as `P`, refusing fields `P` does not define.
    /// - Throws: ``WireError`` `unknownField` or `badRequest` (missing or mistyped field).
    public func decodeParams<P: WireParams>(_: P.Type) throws(WireError) -> P {
        if let extra = Set(params.keys).subtracting(P.fields).sorted().first {
            let known = P.fields.isEmpty ? "it takes none" : "known: " + P.fields.sorted().joined(separator: ", ")
            throw WireError(.unknownField, "\(method) has no param \"\(extra)\" (\(known))")
        }
        // One walk over the params: objects inside are checked where the params type lists their
        // keys (`keys` is that path: "trigger.calendar", "categories[]"), and no number of any
        // method is anywhere near 2^53 (epoch seconds are about 2e9), so a number that large is out
        // of range, named by its path (the decoder would not name it). Unknown keys win.
        var outOfRange: String?
        func walk(_ value: JSONValue, keys: String?, path: String) throws(WireError) {
            switch value {
            case let .number(n) where !(abs(n) < 9e15):
                if outOfRange == nil { outOfRange = path }
            case let .object(o):
                let known = keys.flatMap { P.nestedFields[$0] }
                if let known, let extra = Set(o.keys).subtracting(known).sorted().first {
                    // Named by where it is ("categories.0.actions.1.colour"), as a wrong value is.
                    throw WireError(.unknownField, "\(method) has no param \"\(path).\(extra)\" (known: \(known.sorted().joined(separator: ", ")))")
                }
                for (k, v) in o.sorted(by: { $0.key < $1.key }) {
                    try walk(v, keys: known == nil ? nil : keys! + "." + k, path: path + "." + k)
                }
            case let .array(a):
                for (i, v) in a.enumerated() { try walk(v, keys: keys.map { $0 + "[]" }, path: path + ".\(i)") }
            default: return
            }
        }
        for (k, v) in params.sorted(by: { $0.key < $1.key }) { try walk(v, keys: k, path: k) }
        if let outOfRange {
            // A huge number where no number belongs (`"title": 1e300`) is of the wrong kind, as
            // `"title": 7` is: said so (it read "out of range"). Decoded once more, on this error path only.
            do { _ = try JSONValue.object(params).decode(P.self) } catch let DecodingError.typeMismatch(t, c)
                where Self.pathText(c.codingPath) == outOfRange && !["a number", "a whole number"].contains(Self.plain(t)) {
                throw WireError(.badRequest, "\(method): param \"\(outOfRange)\" must be \(Self.plain(t))")
            } catch {}
            throw WireError(.badRequest, "\(method): param \"\(outOfRange)\" is out of range (no number of the protocol is beyond ±9e15)")
        }
        do { return try JSONValue.object(params).decode(P.self) } catch let e as DecodingError {
            if case let .dataCorrupted(c) = e, c.codingPath.isEmpty,
               let key = Self.fractionWhereWholeNumberBelongs(params, as: P.self) {
                throw WireError(.badRequest, "\(method): param \"\(key.path)\" must be a whole number, not \(key.value)")
            }
            throw WireError(.badRequest, "\(method): \(WireRequest.describe(e))")
        } catch { throw WireError(.badRequest, "\(method): \(error)") }
    }

    /// Which fraction in `params` stands where a whole number belongs, when decoding failed
    /// without naming a key (Foundation's decoder reports a fraction read as an integer, `"badge":
    /// 1.5`, as "not valid JSON" at no path). Each fraction (in key order) is tried as written with
    /// every other one rounded: the first that still fails the same way is one. Only on the error path.
    /// - Returns: its dotted path and value as written, or nil when no fraction explains it.
    /// At most this many fractions are tried one by one (``fractionWhereWholeNumberBelongs(_:as:)``).
    static let maxFractionsSearched = 16

    static func fractionWhereWholeNumberBelongs<P: Decodable>(_ params: [String: JSONValue], as: P.Type) -> (path: String, value: String)? {
        var fractions: [(path: [String], value: Double)] = []
        func walk(_ v: JSONValue, _ path: [String]) {
            switch v {
            case let .number(n) where n.rounded() != n: fractions.append((path, n))
            case let .object(o): for (k, x) in o.sorted(by: { $0.key < $1.key }) { walk(x, path + [k]) }
            case let .array(a): for (i, x) in a.enumerated() { walk(x, path + [String(i)]) }
            default: break
            }
        }
        walk(.object(params), [])
        // Each try decodes the whole params again: bounded, so that a line of thousands of
        // fractions (free-form userInfo) costs a few decodes, not thousands (then the plain message).
        guard fractions.count <= maxFractionsSearched else { return nil }
        func replacing(_ v: JSONValue, _ path: ArraySlice<String>, with n: Double) -> JSONValue {
            guard let head = path.first else { return .number(n) }
            switch v {
            case var .object(o): o[head] = o[head].map { replacing($0, path.dropFirst(), with: n) }; return .object(o)
            case var .array(a):
                if let i = Int(head), a.indices.contains(i) { a[i] = replacing(a[i], path.dropFirst(), with: n) }
                return .array(a)
            default: return v
            }
        }
        for (i, f) in fractions.enumerated() {
            // f as written, every other fraction rounded: if the failure stays, f causes it.
            var tried = JSONValue.object(params)
            for (j, g) in fractions.enumerated() where j != i { tried = replacing(tried, g.path[...], with: g.value.rounded(.towardZero)) }
            do { _ = try tried.decode(P.self) } catch let DecodingError.dataCorrupted(c) where c.codingPath.isEmpty {
                return (f.path.joined(separator: "."), String(decoding: JSONWriter.data(.number(f.value)), as: UTF8.self))
            } catch {}
        }
        return nil
    }

    /// The values of the protocol's string enums, by type name, for "unknown value" messages.
    static let enumChoices: [String: [String]] = [
        "AudioCategory": AudioCategory.allCases.map(\.rawValue),
        "AudioMode": AudioMode.allCases.map(\.rawValue),
        "AudioSessionOption": AudioSessionOption.allCases.map(\.rawValue),
        "NotificationAuthorizationOption": NotificationAuthorizationOption.allCases.map(\.rawValue),
    ]

    /// A decoding type in JSON's words ("a number", "a string"), never a Swift name.
    static func plain(_ t: Any.Type) -> String {
        let name = String(describing: t)
        if name.hasPrefix("Array") { return "a list" }
        if name.hasPrefix("Dictionary") { return "an object" }
        switch name {
        case "String": return "a string"
        case "Bool": return "true or false"
        case "Double", "Float": return "a number"
        case "Int", "Int64", "Int32", "UInt32", "UInt64": return "a whole number"
        default: return "a value of another kind"
        }
    }

    /// A coding path as the errors name a param: `categories.0.actions.1.title`.
    static func pathText(_ p: [CodingKey]) -> String { p.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".") }

    /// A short human description of a decoding error: which key, what was wrong.
    public static func describe(_ e: DecodingError) -> String {
        let path = pathText
        switch e {
        case let .keyNotFound(k, c): return "missing param \"\(path(c.codingPath + [k]))\""
        case let .typeMismatch(t, c): return "param \"\(path(c.codingPath))\" must be \(plain(t))"
        case let .valueNotFound(t, c): return "param \"\(path(c.codingPath))\" must be \(plain(t)), not null"
        case let .dataCorrupted(c):
            let p = path(c.codingPath)
            // "Cannot initialize AudioCategory from invalid String value loud": name the choices.
            if c.debugDescription.hasPrefix("Cannot initialize "), let from = c.debugDescription.range(of: " from invalid String value ") {
                let type = String(c.debugDescription[c.debugDescription.index(c.debugDescription.startIndex, offsetBy: 18)..<from.lowerBound])
                let value = String(c.debugDescription[from.upperBound...])
                let choices = enumChoices[type].map { " (one of: \($0.joined(separator: ", ")))" } ?? ""
                return "param \"\(p)\": unknown value \"\(value)\"" + choices
            }
            // The policy's own decoders say what a value must be in words for people ("interruption
            // level 7 is not 0…3"), marked by their type; Foundation's own messages ("Number 1e400
            // is not representable…") are not shown.
            if let policy = c.underlyingError as? PolicyValueError {
                return p.isEmpty ? policy.message : "param \"\(p)\": \(policy.message)"
            }
            return p.isEmpty ? "params do not have the expected types (a fraction where a whole number belongs, or a number out of range)"
                             : "param \"\(p)\" has a value of the wrong type or range"
        @unknown default: return "\(e)"
        }
    }

    /// Encodes the request as one line (without the newline).
    public func encoded() throws -> Data {
        try WireCoding.encode(JSONValue.object(["id": id, "method": .string(method), "params": .object(params)]))
    }
}

/// A parse failure, with the request id when it could be read.
public struct WireParseError: Error, Sendable {
    public var id: JSONValue?
    public var error: WireError
}

/// Params of one method. `fields` lists every key the method accepts (others → `unknownField`).
public protocol WireParams: Codable, Sendable {
    /// The param names the method knows; any other is refused with `unknownField`.
    static var fields: Set<String> { get }
    /// The keys known inside object params, by path: `"trigger"`, `"trigger.calendar"`, and
    /// `"categories[]"` for each element of an array. Objects at other paths are not checked.
    static var nestedFields: [String: Set<String>] { get }
}

extension WireParams {
    public static var nestedFields: [String: Set<String>] { [:] }
}

/// A reply: `{"id": 1, "result": {...}}` or `{"id": 1, "error": {"code": "...", "message": "..."}}`.
public struct WireReply: Codable, Sendable, Equatable {
    public var id: JSONValue
    public var result: JSONValue?
    public var error: WireError?
    public init(id: JSONValue, result: JSONValue) { self.id = id; self.result = result; self.error = nil }
    public init(id: JSONValue?, error: WireError) { self.id = id ?? .null; self.result = nil; self.error = error }
}

/// An event: `{"event": "interruptionBegan", "data": {...}, "time": 1764500000.123}` (time in
/// seconds since the Unix epoch).
public struct WireEvent: Codable, Sendable, Equatable {
    public var event: String
    public var data: JSONValue
    public var time: Double
    public init(event: String, data: JSONValue, time: Double) { self.event = event; self.data = data; self.time = time }
}

/// Anything the daemon sends, as the client reads it.
public enum ServerMessage: Sendable, Equatable {
    case greeting(Greeting)
    case reply(WireReply)
    case event(WireEvent)

    /// Parses one line from the daemon.
    /// - Throws: ``JSONDepth/TooDeep`` for a line nested deeper than the daemon ever sends
    ///   (4 × ``JSONDepth/maximum``: events carry app data of up to that depth inside), a decoding
    ///   error for anything else that is not one of the daemon's messages.
    public static func parse(_ line: [UInt8]) throws -> ServerMessage {
        try JSONDepth.check(line, limit: 4 * JSONDepth.maximum)
        let v = try JSONValue.parse(Data(line))
        guard let o = v.objectValue else { throw WireError(.badRequest, "not an object") }
        if let g = o["greeting"] { return .greeting(try g.decode(Greeting.self)) }
        // Events and replies are taken from the parsed value as they are: through `decode` their
        // `data` and `result` went back to text and through `JSONDecoder` into a `JSONValue`
        // again, half of a client's CPU under a burst of notifications (issue 9).
        if let name = o["event"] {
            guard case let .string(event) = name, case let .number(time)? = o["time"] else {
                throw WireError(.badRequest, "an event needs a string event and a number time")
            }
            return .event(WireEvent(event: event, data: o["data"] ?? .null, time: time))
        }
        let id = o["id"] ?? .null
        if let e = o["error"], e != .null {
            guard case let .string(code)? = e["code"], case let .string(message)? = e["message"] else {
                throw WireError(.badRequest, "an error needs a string code and message")
            }
            guard let known = WireErrorCode(rawValue: code) else { throw WireError(.badRequest, "unknown error code \(code)") }
            return .reply(WireReply(id: id, error: WireError(known, message)))
        }
        var reply = WireReply(id: id, result: .null)
        reply.result = o["result"] == .null ? nil : o["result"]  // `null` is no result, as the decoder read it
        return .reply(reply)
    }

    /// Encodes as one line (without the newline).
    public func encoded() throws -> Data {
        switch self {
        case let .greeting(g): return try WireCoding.encode(["greeting": g])
        case let .reply(r): return try WireCoding.encode(r)
        case let .event(e): return try WireCoding.encode(e)
        }
    }
}
