import Foundation

/// Any JSON value: the untyped form of params, results and event data on the wire.
public enum JSONValue: Codable, Sendable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case let .bool(b): try c.encode(b)
        case let .number(n):
            if n.rounded() == n, abs(n) < 1e15 { try c.encode(Int64(n)) } else { try c.encode(n) }
        case let .string(s): try c.encode(s)
        case let .array(a): try c.encode(a)
        case let .object(o): try c.encode(o)
        }
    }

    /// The members of an object (nil for other values).
    public var objectValue: [String: JSONValue]? { if case let .object(o) = self { return o } else { return nil } }
    public var stringValue: String? { if case let .string(s) = self { return s } else { return nil } }
    public var doubleValue: Double? { if case let .number(n) = self { return n } else { return nil } }
    public var boolValue: Bool? { if case let .bool(b) = self { return b } else { return nil } }
    public subscript(key: String) -> JSONValue? { objectValue?[key] }

    public var description: String {
        String(decoding: JSONWriter.data(self), as: UTF8.self)
    }

    /// Converts any Encodable to a JSONValue: the value `JSONEncoder`'s text parses to, built
    /// directly (``JSONValueEncoder``, issue 9).
    /// - Throws: `EncodingError` for a non-finite number.
    public init<T: Encodable>(encoding value: T) throws {
        self = try JSONValueEncoder.encode(value)
    }

    /// Parses JSON text (any value, not only an object) with Foundation's `JSONSerialization`.
    ///
    /// Not `JSONDecoder` with ``init(from:)``: that tries each kind in turn and pays for every
    /// failed try with an error that carries its coding path, so a 64 KiB line of arrays nested
    /// 28 deep took 1 s of CPU in a release build (issue 7, hole 4); `JSONSerialization` takes
    /// 44 ms for the same line. Callers bound the depth first (``JSONDepth``).
    /// - Throws: the `NSError` of `JSONSerialization` for text that is not JSON (its
    ///   `NSDebugDescription` says where).
    public static func parse(_ data: Data) throws -> JSONValue {
        JSONValue(serialized: try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]))
    }

    /// The type `JSONSerialization` gives `true` and `false` (an `NSNumber` subclass; `is Bool`
    /// also holds for the numbers 0 and 1, so the type itself is compared).
    private static let booleanType = ObjectIdentifier(type(of: NSNumber(value: true)))

    private init(serialized any: Any) {
        // Containers first: casting a Swift array to NSNumber bridges the whole array to NSArray
        // (and its elements, recursively) before it fails, which made the walk quadratic.
        switch any {
        case let a as [Any]: self = .array(a.map { JSONValue(serialized: $0) })
        case let o as [String: Any]: self = .object(o.mapValues { JSONValue(serialized: $0) })
        case let s as String: self = .string(s)
        case let n as NSNumber:
            self = ObjectIdentifier(type(of: n)) == JSONValue.booleanType ? .bool(n.boolValue) : .number(n.doubleValue)
        default: self = .null  // NSNull
        }
    }

    /// Decodes a typed value from this JSON value.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONValueDecoder.decode(T.self, from: self)
    }

    /// ``decode(_:)`` the way it was done before ``JSONValueDecoder``: written as text and parsed
    /// by `JSONDecoder`. For tests that hold the two to the same results and errors.
    func decodeThroughText<T: Decodable>(_ type: T.Type) throws -> T {
        try WireCoding.decoder.decode(T.self, from: JSONWriter.data(self))
    }
}

/// The shared encoder and decoder settings of the protocol (sorted keys, no slash escaping).
public enum WireCoding {
    public static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }()
    public static let decoder = JSONDecoder()
}

extension WireCoding {
    /// The size in bytes of `value` as the daemon writes it (compact, sorted keys); 0 if it
    /// cannot be encoded. For paging replies by size (listings, issue 7).
    public static func encodedSize<T: Encodable>(of value: T) -> Int {
        (try? encode(value))?.count ?? 0
    }
}
