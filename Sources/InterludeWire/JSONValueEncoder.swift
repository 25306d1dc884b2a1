import Foundation

/// Encodes an `Encodable` straight to a ``JSONValue``, without text in between (issue 9).
///
/// `JSONValue(encoding:)` went through `JSONEncoder` to bytes and parsed them back with
/// `JSONSerialization`, and every event the daemon publishes (a `delivered` per
/// `notification.add`, a `duckChanged` per ramp) paid for both: 8 % of the daemon's time under an
/// 8-client burst. The value is the one that round trip gave: keys by their string value, `nil`
/// optionals left out (as synthesized `encodeIfPresent` does), every number a `Double`, `Data` as
/// base64 and `URL` as its absolute string (`JSONEncoder`'s defaults); numbers are exact (the
/// text round trip could move one by an ULP).
/// - Throws: `EncodingError.invalidValue` for a non-finite number, as `JSONEncoder` does.
enum JSONValueEncoder {
    static func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let root = Node()
        try root.box(value, path: [])
        return root.value
    }

    /// One value being built: a single value, an object or an array. Members and elements that
    /// are plain values (strings, numbers, booleans) are kept as they are; only containers get a
    /// node of their own (a node per value was a third of this encoder's time, issue 9).
    final class Node {
        var single: JSONValue?
        var object: [String: Slot]?
        var array: [Slot]?

        var value: JSONValue {
            if let single { return single }
            if let array { return .array(array.map(\.value)) }
            return .object((object ?? [:]).mapValues(\.value))
        }

        /// Encodes `v` into this node. The types `JSONEncoder` treats specially are told apart by
        /// their metadata (a compare), not by dynamic casts of every value.
        func box<T: Encodable>(_ v: T, path: [any CodingKey]) throws {
            if T.self == JSONValue.self {
                single = (v as! JSONValue)
            } else if T.self == Data.self {
                single = .string((v as! Data).base64EncodedString())
            } else if T.self == URL.self {
                single = .string((v as! URL).absoluteString)
            } else if T.self == String.self {
                single = .string(v as! String)
            } else {
                try v.encode(to: NodeEncoder(node: self, codingPath: path))
            }
        }

        func set(_ j: JSONValue) { single = j }
    }

    /// A member or element: a plain value, or a container being built.
    enum Slot {
        case value(JSONValue)
        case node(Node)

        var value: JSONValue {
            switch self {
            case let .value(v): v
            case let .node(n): n.value
            }
        }
    }

    static func number(_ d: Double, _ path: [any CodingKey]) throws -> JSONValue {
        guard d.isFinite else {
            throw EncodingError.invalidValue(d, .init(codingPath: path, debugDescription: "\(d) is not a JSON number"))
        }
        return .number(d)
    }

    struct NodeEncoder: Encoder {
        let node: Node
        var codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            if node.object == nil { node.object = [:] }
            return KeyedEncodingContainer(Keyed<Key>(node: node, codingPath: codingPath))
        }
        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            if node.array == nil { node.array = [] }
            return Unkeyed(node: node, codingPath: codingPath)
        }
        func singleValueContainer() -> any SingleValueEncodingContainer { Single(node: node, codingPath: codingPath) }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let node: Node
        var codingPath: [any CodingKey]

        private func put(_ j: JSONValue, _ key: Key) {
            node.object![key.stringValue] = .value(j)
        }
        mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
        mutating func encode(_ v: Bool, forKey key: Key) throws { put(.bool(v), key) }
        mutating func encode(_ v: String, forKey key: Key) throws { put(.string(v), key) }
        mutating func encode(_ v: Double, forKey key: Key) throws { put(try number(v, codingPath + [key]), key) }
        mutating func encode(_ v: Float, forKey key: Key) throws { put(try number(Double("\(v)") ?? .nan, codingPath + [key]), key) }
        mutating func encode(_ v: Int, forKey key: Key) throws { put(.number(Double(v)), key) }
        mutating func encode(_ v: Int8, forKey key: Key) throws { put(.number(Double(v)), key) }
        mutating func encode(_ v: Int16, forKey key: Key) throws { put(.number(Double(v)), key) }
        mutating func encode(_ v: Int32, forKey key: Key) throws { put(.number(Double(v)), key) }
        mutating func encode(_ v: Int64, forKey key: Key) throws { put(.number(Double(v)), key) }
        mutating func encode(_ v: UInt, forKey key: Key) throws { put(.number(Double(v)), key) }
        mutating func encode(_ v: UInt8, forKey key: Key) throws { put(.number(Double(v)), key) }
        mutating func encode(_ v: UInt16, forKey key: Key) throws { put(.number(Double(v)), key) }
        mutating func encode(_ v: UInt32, forKey key: Key) throws { put(.number(Double(v)), key) }
        mutating func encode(_ v: UInt64, forKey key: Key) throws { put(.number(Double(v)), key) }
        mutating func encode<T: Encodable>(_ v: T, forKey key: Key) throws {
            let n = Node()
            try n.box(v, path: codingPath + [key])
            node.object![key.stringValue] = n.single.map(Slot.value) ?? .node(n)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            let n = Node()
            node.object![key.stringValue] = .node(n)
            return NodeEncoder(node: n, codingPath: codingPath + [key]).container(keyedBy: keyType)
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let n = Node()
            node.object![key.stringValue] = .node(n)
            return NodeEncoder(node: n, codingPath: codingPath + [key]).unkeyedContainer()
        }
        mutating func superEncoder() -> any Encoder { superEncoder(named: "super") }
        mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key.stringValue) }
        private func superEncoder(named name: String) -> any Encoder {
            let n = Node()
            node.object![name] = .node(n)
            return NodeEncoder(node: n, codingPath: codingPath)
        }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let node: Node
        var codingPath: [any CodingKey]
        var count: Int { node.array!.count }

        private func add(_ j: JSONValue) {
            node.array!.append(.value(j))
        }
        private func child() -> Node {
            let n = Node()
            node.array!.append(.node(n))
            return n
        }
        mutating func encodeNil() throws { add(.null) }
        mutating func encode(_ v: Bool) throws { add(.bool(v)) }
        mutating func encode(_ v: String) throws { add(.string(v)) }
        mutating func encode(_ v: Double) throws { add(try number(v, codingPath)) }
        mutating func encode(_ v: Float) throws { add(try number(Double("\(v)") ?? .nan, codingPath)) }
        mutating func encode(_ v: Int) throws { add(.number(Double(v))) }
        mutating func encode(_ v: Int8) throws { add(.number(Double(v))) }
        mutating func encode(_ v: Int16) throws { add(.number(Double(v))) }
        mutating func encode(_ v: Int32) throws { add(.number(Double(v))) }
        mutating func encode(_ v: Int64) throws { add(.number(Double(v))) }
        mutating func encode(_ v: UInt) throws { add(.number(Double(v))) }
        mutating func encode(_ v: UInt8) throws { add(.number(Double(v))) }
        mutating func encode(_ v: UInt16) throws { add(.number(Double(v))) }
        mutating func encode(_ v: UInt32) throws { add(.number(Double(v))) }
        mutating func encode(_ v: UInt64) throws { add(.number(Double(v))) }
        mutating func encode<T: Encodable>(_ v: T) throws { try child().box(v, path: codingPath) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            NodeEncoder(node: child(), codingPath: codingPath).container(keyedBy: keyType)
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            NodeEncoder(node: child(), codingPath: codingPath).unkeyedContainer()
        }
        mutating func superEncoder() -> any Encoder { NodeEncoder(node: child(), codingPath: codingPath) }
    }

    struct Single: SingleValueEncodingContainer {
        let node: Node
        var codingPath: [any CodingKey]
        mutating func encodeNil() throws { node.set(.null) }
        mutating func encode(_ v: Bool) throws { node.set(.bool(v)) }
        mutating func encode(_ v: String) throws { node.set(.string(v)) }
        mutating func encode(_ v: Double) throws { node.set(try number(v, codingPath)) }
        mutating func encode(_ v: Float) throws { node.set(try number(Double("\(v)") ?? .nan, codingPath)) }
        mutating func encode(_ v: Int) throws { node.set(.number(Double(v))) }
        mutating func encode(_ v: Int8) throws { node.set(.number(Double(v))) }
        mutating func encode(_ v: Int16) throws { node.set(.number(Double(v))) }
        mutating func encode(_ v: Int32) throws { node.set(.number(Double(v))) }
        mutating func encode(_ v: Int64) throws { node.set(.number(Double(v))) }
        mutating func encode(_ v: UInt) throws { node.set(.number(Double(v))) }
        mutating func encode(_ v: UInt8) throws { node.set(.number(Double(v))) }
        mutating func encode(_ v: UInt16) throws { node.set(.number(Double(v))) }
        mutating func encode(_ v: UInt32) throws { node.set(.number(Double(v))) }
        mutating func encode(_ v: UInt64) throws { node.set(.number(Double(v))) }
        mutating func encode<T: Encodable>(_ v: T) throws { try node.box(v, path: codingPath) }
    }
}
