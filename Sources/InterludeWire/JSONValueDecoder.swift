import Foundation

/// Decodes a `Decodable` straight from a ``JSONValue``, without text in between (issue 9): the
/// mirror of ``JSONValueEncoder``.
///
/// ``JSONValue/decode(_:)`` wrote the value back to JSON text (``JSONWriter``) and parsed it again
/// with `JSONDecoder`: every request's params paid for a second parse (the line was parsed once
/// already, by `JSONSerialization`, into the ``JSONValue``). The result and the errors are the
/// ones that round trip gave, so that error messages (``WireRequest/describe(_:)``) stay as they
/// were:
/// - `String`, `Bool` and numbers from their own kind only (`typeMismatch` otherwise, at the
///   value's path); a whole-number type takes a number that is exactly one (`1.0` is `1`) and, for
///   a fraction or a number out of its range, `dataCorrupted` at no path, as `JSONDecoder` said of
///   the text ("not valid JSON"; ``WireRequest/decodeParams(_:)`` then names the fraction);
/// - `null` for a value that is not optional: `valueNotFound`; a missing key: `keyNotFound`;
/// - `Data` from base64 text and `URL` from its string (`JSONDecoder`'s defaults); `Date` as
///   `Date(from:)` reads it (a number, seconds since 2001: `deferredToDate`).
enum JSONValueDecoder {
    static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try unbox(value, as: T.self, path: [])
    }

    /// The error `JSONDecoder` gave for a number a whole-number type cannot hold.
    static func notWhole() -> DecodingError {
        .dataCorrupted(.init(codingPath: [], debugDescription: "The given data was not valid JSON."))
    }

    static func mismatch(_ type: Any.Type, _ value: JSONValue, _ path: [any CodingKey]) -> DecodingError {
        if case .null = value {
            return .valueNotFound(type, .init(codingPath: path, debugDescription: "Expected \(type) value but found null instead."))
        }
        return .typeMismatch(type, .init(codingPath: path, debugDescription: "Expected to decode \(type) but found \(kind(value)) instead."))
    }

    static func kind(_ v: JSONValue) -> String {
        switch v {
        case .null: "null"
        case .bool: "bool"
        case .number: "number"
        case .string: "a string"
        case .array: "an array"
        case .object: "a dictionary"
        }
    }

    /// `value` as `T`: the kinds `JSONDecoder` reads itself first, by metadata compare (not a
    /// dynamic cast per value), then `T(from:)`.
    static func unbox<T: Decodable>(_ value: JSONValue, as: T.Type, path: [any CodingKey]) throws -> T {
        if T.self == JSONValue.self { return value as! T }
        if T.self == String.self {
            guard case let .string(s) = value else { throw mismatch(String.self, value, path) }
            return s as! T
        }
        if T.self == Double.self {
            guard case let .number(n) = value else { throw mismatch(Double.self, value, path) }
            return n as! T
        }
        if T.self == Bool.self {
            guard case let .bool(b) = value else { throw mismatch(Bool.self, value, path) }
            return b as! T
        }
        if T.self == Int.self { return try whole(value, as: Int.self, path: path) as! T }
        if T.self == Data.self {
            guard case let .string(s) = value else { throw mismatch(Data.self, value, path) }
            guard let d = Data(base64Encoded: s) else {
                throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "Encountered Data is not valid Base64."))
            }
            return d as! T
        }
        if T.self == URL.self {
            guard case let .string(s) = value else { throw mismatch(URL.self, value, path) }
            guard let u = URL(string: s) else {
                throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "Invalid URL string."))
            }
            return u as! T
        }
        return try T(from: ValueDecoder(value: value, codingPath: path))
    }

    static func whole<I: FixedWidthInteger>(_ value: JSONValue, as: I.Type, path: [any CodingKey]) throws -> I {
        guard case let .number(n) = value else { throw mismatch(I.self, value, path) }
        guard let i = I(exactly: n) else { throw notWhole() }
        return i
    }

    static func float<F: BinaryFloatingPoint>(_ value: JSONValue, as: F.Type, path: [any CodingKey]) throws -> F {
        guard case let .number(n) = value else { throw mismatch(F.self, value, path) }
        return F(n)
    }

    /// A key of an array's element (its index), as `JSONDecoder` names it.
    struct IndexKey: CodingKey {
        var stringValue: String
        var intValue: Int?
        init(_ index: Int) { stringValue = "Index \(index)"; intValue = index }
        init?(stringValue: String) { self.stringValue = stringValue; intValue = nil }
        init?(intValue: Int) { self.init(intValue) }
    }

    struct ValueDecoder: Decoder {
        let value: JSONValue
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            guard case let .object(o) = value else { throw mismatch([String: Any].self, value, codingPath) }
            return KeyedDecodingContainer(Keyed<Key>(object: o, codingPath: codingPath))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard case let .array(a) = value else { throw mismatch([Any].self, value, codingPath) }
            return Unkeyed(array: a, codingPath: codingPath)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(value: value, codingPath: codingPath) }
    }

    struct Single: SingleValueDecodingContainer {
        let value: JSONValue
        let codingPath: [any CodingKey]
        func decodeNil() -> Bool { if case .null = value { true } else { false } }
        func decode(_ type: Bool.Type) throws -> Bool { try unbox(value, as: Bool.self, path: codingPath) }
        func decode(_ type: String.Type) throws -> String { try unbox(value, as: String.self, path: codingPath) }
        func decode(_ type: Double.Type) throws -> Double { try unbox(value, as: Double.self, path: codingPath) }
        func decode(_ type: Float.Type) throws -> Float { try float(value, as: Float.self, path: codingPath) }
        func decode(_ type: Int.Type) throws -> Int { try whole(value, as: Int.self, path: codingPath) }
        func decode(_ type: Int8.Type) throws -> Int8 { try whole(value, as: Int8.self, path: codingPath) }
        func decode(_ type: Int16.Type) throws -> Int16 { try whole(value, as: Int16.self, path: codingPath) }
        func decode(_ type: Int32.Type) throws -> Int32 { try whole(value, as: Int32.self, path: codingPath) }
        func decode(_ type: Int64.Type) throws -> Int64 { try whole(value, as: Int64.self, path: codingPath) }
        func decode(_ type: UInt.Type) throws -> UInt { try whole(value, as: UInt.self, path: codingPath) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try whole(value, as: UInt8.self, path: codingPath) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try whole(value, as: UInt16.self, path: codingPath) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try whole(value, as: UInt32.self, path: codingPath) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try whole(value, as: UInt64.self, path: codingPath) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try unbox(value, as: T.self, path: codingPath) }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let object: [String: JSONValue]
        let codingPath: [any CodingKey]
        var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }
        func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

        func member(_ key: Key) throws -> JSONValue {
            guard let v = object[key.stringValue] else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath,
                    debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\")."))
            }
            return v
        }

        func decodeNil(forKey key: Key) throws -> Bool { if case .null = try member(key) { true } else { false } }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try unbox(try member(key), as: T.self, path: codingPath + [key])
        }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try unbox(try member(key), as: Bool.self, path: codingPath + [key]) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try unbox(try member(key), as: String.self, path: codingPath + [key]) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try unbox(try member(key), as: Double.self, path: codingPath + [key]) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try float(try member(key), as: Float.self, path: codingPath + [key]) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try whole(try member(key), as: Int.self, path: codingPath + [key]) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try whole(try member(key), as: Int32.self, path: codingPath + [key]) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try whole(try member(key), as: Int64.self, path: codingPath + [key]) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try whole(try member(key), as: UInt32.self, path: codingPath + [key]) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try whole(try member(key), as: UInt64.self, path: codingPath + [key]) }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try ValueDecoder(value: try member(key), codingPath: codingPath + [key]).container(keyedBy: NestedKey.self)
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try ValueDecoder(value: try member(key), codingPath: codingPath + [key]).unkeyedContainer()
        }
        func superDecoder() throws -> any Decoder {
            ValueDecoder(value: object["super"] ?? .null, codingPath: codingPath + [IndexKey(stringValue: "super")!])
        }
        func superDecoder(forKey key: Key) throws -> any Decoder {
            ValueDecoder(value: object[key.stringValue] ?? .null, codingPath: codingPath + [key])
        }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        let array: [JSONValue]
        let codingPath: [any CodingKey]
        var currentIndex = 0
        init(array: [JSONValue], codingPath: [any CodingKey]) { self.array = array; self.codingPath = codingPath }
        var count: Int? { array.count }
        var isAtEnd: Bool { currentIndex >= array.count }

        mutating func next(_ type: Any.Type) throws -> (JSONValue, [any CodingKey]) {
            let path = codingPath + [IndexKey(currentIndex)]
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(type, .init(codingPath: path, debugDescription: "Unkeyed container is at end."))
            }
            defer { currentIndex += 1 }
            return (array[currentIndex], path)
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd else { return try next(Any?.self).0 == .null }
            if case .null = array[currentIndex] { currentIndex += 1; return true }
            return false
        }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let (v, path) = try next(T.self)
            return try unbox(v, as: T.self, path: path)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            let (v, path) = try next([String: Any].self)
            return try ValueDecoder(value: v, codingPath: path).container(keyedBy: NestedKey.self)
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let (v, path) = try next([Any].self)
            return try ValueDecoder(value: v, codingPath: path).unkeyedContainer()
        }
        mutating func superDecoder() throws -> any Decoder {
            let (v, path) = try next(Any.self)
            return ValueDecoder(value: v, codingPath: path)
        }
    }
}
