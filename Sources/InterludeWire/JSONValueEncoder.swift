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
///
/// The same tree is also written straight to text (``text(_:)``, the daemon's every reply, event
/// line and stored row through ``WireCoding/encode(_:)``): objects are kept as their members in
/// the order they were encoded, not as dictionaries, and sorted once when written. Building a
/// `JSONValue` first made two dictionaries per object (the members, then their values), hashed
/// every key twice, and then sorted them anyway: about a tenth of the daemon's time per
/// `notification.add` (issue 9).
enum JSONValueEncoder {
    static func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let root = Node()
        try root.box(value, link: nil)
        return root.value
    }

    /// `value`'s JSON text, the bytes ``JSONWriter`` writes for ``encode(_:)``'s value: keys
    /// sorted by their UTF-8 bytes, a key encoded twice in one object written once, with its last
    /// value (as the dictionary kept it).
    /// - Throws: `EncodingError.invalidValue` for a non-finite number.
    static func text<T: Encodable>(_ value: T) throws -> [UInt8] {
        let root = Node()
        try root.box(value, link: nil)
        var out: [UInt8] = []
        out.reserveCapacity(256)
        root.write(to: &out)
        return out
    }

    /// One value being built: a single value, an object or an array. Members and elements that
    /// are plain values (strings, numbers, booleans) are kept as they are; only containers get a
    /// node of their own (a node per value was a third of this encoder's time, issue 9).
    final class Node {
        var single: JSONValue?
        /// An object's members, in the order they were encoded (a key may come more than once:
        /// the last one counts).
        var object: [(key: String, slot: Slot)]?
        var array: [Slot]?

        var value: JSONValue {
            if let single { return single }
            if let array { return .array(array.map(\.value)) }
            var members: [String: JSONValue] = [:]
            members.reserveCapacity(object?.count ?? 0)
            for (key, slot) in object ?? [] { members[key] = slot.value }
            return .object(members)
        }

        /// Appends this value's JSON text (as ``JSONWriter`` writes ``value``).
        func write(to out: inout [UInt8]) {
            if let single { return JSONWriter.append(single, to: &out) }
            if let array {
                out.append(UInt8(ascii: "["))
                for (i, slot) in array.enumerated() {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    slot.write(to: &out)
                }
                out.append(UInt8(ascii: "]"))
                return
            }
            let members = object ?? []
            // By key bytes, then by the order encoded: of equal keys, the last is written.
            let order = members.indices.sorted { a, b in
                let ka = members[a].key, kb = members[b].key
                if ka.utf8.elementsEqual(kb.utf8) { return a < b }
                return JSONWriter.keyPrecedes(ka, kb)
            }
            out.append(UInt8(ascii: "{"))
            var first = true
            for (n, i) in order.enumerated() {
                if n + 1 < order.count, members[order[n + 1]].key.utf8.elementsEqual(members[i].key.utf8) { continue }
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                JSONWriter.appendString(members[i].key, to: &out)
                out.append(UInt8(ascii: ":"))
                members[i].slot.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }

        /// Encodes `v` into this node. The types `JSONEncoder` treats specially are told apart by
        /// their metadata (a compare), not by dynamic casts of every value.
        func box<T: Encodable>(_ v: T, link: PathLink?) throws {
            if T.self == JSONValue.self {
                single = (v as! JSONValue)
            } else if T.self == Data.self {
                single = .string((v as! Data).base64EncodedString())
            } else if T.self == URL.self {
                single = .string((v as! URL).absoluteString)
            } else if T.self == String.self {
                single = .string(v as! String)
            } else {
                try v.encode(to: NodeEncoder(node: self, link: link))
            }
        }

        func set(_ j: JSONValue) { single = j }
    }

    /// Where a value is, as a linked list from the root: the coding path, made into an array only
    /// when asked for (an error, a type that reads it). An array per nested value (`codingPath +
    /// [key]`) was an allocation and a copy of the path for every member (issue 9).
    final class PathLink {
        let parent: PathLink?
        let key: any CodingKey
        init(_ parent: PathLink?, _ key: any CodingKey) {
            self.parent = parent
            self.key = key
        }

        /// The keys from the root down to `link` (empty for the root).
        static func keys(_ link: PathLink?) -> [any CodingKey] {
            var keys: [any CodingKey] = []
            var l = link
            while let here = l { keys.append(here.key); l = here.parent }
            return keys.reversed()
        }
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

        func write(to out: inout [UInt8]) {
            switch self {
            case let .value(v): JSONWriter.append(v, to: &out)
            case let .node(n): n.write(to: &out)
            }
        }
    }

    static func number(_ d: Double, _ link: @autoclosure () -> PathLink?) throws -> JSONValue {
        guard d.isFinite else {
            throw EncodingError.invalidValue(d, .init(codingPath: PathLink.keys(link()), debugDescription: "\(d) is not a JSON number"))
        }
        return .number(d)
    }

    struct NodeEncoder: Encoder {
        let node: Node
        let link: PathLink?
        var codingPath: [any CodingKey] { PathLink.keys(link) }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            if node.object == nil { node.object = [] }
            return KeyedEncodingContainer(Keyed<Key>(node: node, link: link))
        }
        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            if node.array == nil { node.array = [] }
            return Unkeyed(node: node, link: link)
        }
        func singleValueContainer() -> any SingleValueEncodingContainer { Single(node: node, link: link) }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let node: Node
        let link: PathLink?
        var codingPath: [any CodingKey] { PathLink.keys(link) }

        private func put(_ j: JSONValue, _ key: Key) {
            node.object!.append((key.stringValue, .value(j)))
        }
        mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
        mutating func encode(_ v: Bool, forKey key: Key) throws { put(.bool(v), key) }
        mutating func encode(_ v: String, forKey key: Key) throws { put(.string(v), key) }
        mutating func encode(_ v: Double, forKey key: Key) throws { put(try number(v, PathLink(link, key)), key) }
        mutating func encode(_ v: Float, forKey key: Key) throws { put(try number(Double("\(v)") ?? .nan, PathLink(link, key)), key) }
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
            try n.box(v, link: PathLink(link, key))
            node.object!.append((key.stringValue, n.single.map(Slot.value) ?? .node(n)))
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            let n = Node()
            node.object!.append((key.stringValue, .node(n)))
            return NodeEncoder(node: n, link: PathLink(link, key)).container(keyedBy: keyType)
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let n = Node()
            node.object!.append((key.stringValue, .node(n)))
            return NodeEncoder(node: n, link: PathLink(link, key)).unkeyedContainer()
        }
        mutating func superEncoder() -> any Encoder { superEncoder(named: "super") }
        mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key.stringValue) }
        private func superEncoder(named name: String) -> any Encoder {
            let n = Node()
            node.object!.append((name, .node(n)))
            return NodeEncoder(node: n, link: link)
        }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let node: Node
        let link: PathLink?
        var codingPath: [any CodingKey] { PathLink.keys(link) }
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
        mutating func encode(_ v: Double) throws { add(try number(v, link)) }
        mutating func encode(_ v: Float) throws { add(try number(Double("\(v)") ?? .nan, link)) }
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
        mutating func encode<T: Encodable>(_ v: T) throws { try child().box(v, link: link) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            NodeEncoder(node: child(), link: link).container(keyedBy: keyType)
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            NodeEncoder(node: child(), link: link).unkeyedContainer()
        }
        mutating func superEncoder() -> any Encoder { NodeEncoder(node: child(), link: link) }
    }

    struct Single: SingleValueEncodingContainer {
        let node: Node
        let link: PathLink?
        var codingPath: [any CodingKey] { PathLink.keys(link) }
        mutating func encodeNil() throws { node.set(.null) }
        mutating func encode(_ v: Bool) throws { node.set(.bool(v)) }
        mutating func encode(_ v: String) throws { node.set(.string(v)) }
        mutating func encode(_ v: Double) throws { node.set(try number(v, link)) }
        mutating func encode(_ v: Float) throws { node.set(try number(Double("\(v)") ?? .nan, link)) }
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
        mutating func encode<T: Encodable>(_ v: T) throws { try node.box(v, link: link) }
    }
}
