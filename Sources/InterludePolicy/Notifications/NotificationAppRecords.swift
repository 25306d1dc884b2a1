/// The policy's records of the apps it knows (``NotificationState/apps``), by app id: a map that
/// copies in parts.
///
/// The engine keeps the state from before each request while the policy changes it (to compare,
/// and to take it back when the store fails, N15), so the first change of a request copied the
/// whole map: at 10,000 apps, 240 µs of every `notification.add`, and the store's row diff then
/// compared every app's record (1.4 ms). Nothing bounds how many apps the policy knows: a D-Bus
/// client names its own `app_name`. Here the records are kept in ``shardCount`` parts by the
/// hash of the app id; a change copies the part it touches (at 10,000 apps, about 150 records)
/// and the list of parts, and a part no change touched is the same object in both states, which
/// ``forEachChange(from:_:)`` (the store's row diff) and `==` skip.
///
/// Reads like a dictionary of app id → record: `apps[id]` reads, sets (nil removes) and changes
/// in place; iteration yields `(key, value)` pairs in no set order. Encoded as that dictionary
/// (the JSON of a state is unchanged). The parts depend on the process's hash seed, never on
/// what is saved.
public struct NotificationAppRecords: Sendable, Equatable, Codable, Sequence {
    /// Parts of the map (a power of two).
    public static let shardCount = 64

    /// One part: its records. Shared between states until one of them changes it (then that
    /// state takes a copy: ``ownPart(_:)``).
    fileprivate final class Shard: @unchecked Sendable {
        // `@unchecked Sendable`: changed only through `mutate`, when the one state holding it
        // is the caller (`isKnownUniquelyReferenced`); a shared part is only read.
        var records: [String: NotificationAppRecord]
        init(_ records: [String: NotificationAppRecord] = [:]) { self.records = records }
    }

    /// Empty until the first record (an empty state holds no parts).
    private var shards: [Shard] = []
    /// Records in all parts.
    public private(set) var count = 0

    /// No records.
    public init() {}

    /// The records of `dictionary`.
    public init(_ dictionary: [String: NotificationAppRecord]) {
        for (app, record) in dictionary { self[app] = record }
    }

    /// Whether no app is known.
    public var isEmpty: Bool { count == 0 }

    private static func shardIndex(_ app: String) -> Int {
        var h = Hasher()
        h.combine(app)
        return h.finalize() & (shardCount - 1)
    }

    /// Makes part `i` the state's own (a copy if another state shares it; the parts are made on
    /// the first record).
    private mutating func ownPart(_ i: Int) {
        if shards.isEmpty { shards = (0..<Self.shardCount).map { _ in Shard() } }
        if !isKnownUniquelyReferenced(&shards[i]) { shards[i] = Shard(shards[i].records) }
    }

    /// The record of `app`; nil if the app is unknown. Setting nil forgets the app.
    public subscript(app: String) -> NotificationAppRecord? {
        get { shards.isEmpty ? nil : shards[Self.shardIndex(app)].records[app] }
        set {
            let i = Self.shardIndex(app)
            ownPart(i)
            let before = shards[i].records.count
            shards[i].records[app] = newValue
            count += shards[i].records.count - before
        }
        _modify {
            let i = Self.shardIndex(app)
            ownPart(i)
            let before = shards[i].records.count
            defer { count += shards[i].records.count - before }
            yield &shards[i].records[app]
        }
    }

    /// The record of `app`, or `defaultValue` (a new app) to read or change in place (as a
    /// dictionary's `subscript(_:default:)`: a change stores it).
    public subscript(app: String, default defaultValue: @autoclosure () -> NotificationAppRecord) -> NotificationAppRecord {
        get { self[app] ?? defaultValue() }
        _modify {
            let i = Self.shardIndex(app)
            ownPart(i)
            let before = shards[i].records.count
            defer { count += shards[i].records.count - before }
            yield &shards[i].records[app, default: defaultValue()]
        }
    }

    /// Every app id, in no set order.
    public var keys: [String] { shards.flatMap { $0.records.keys } }

    /// The records whose `transform` is not nil, by app id.
    public func compactMapValues<T>(_ transform: (NotificationAppRecord) throws -> T?) rethrows -> [String: T] {
        var out: [String: T] = [:]
        for (app, record) in self { if let t = try transform(record) { out[app] = t } }
        return out
    }

    /// The records as a plain dictionary.
    public var dictionary: [String: NotificationAppRecord] {
        var out: [String: NotificationAppRecord] = [:]
        out.reserveCapacity(count)
        for shard in shards { out.merge(shard.records) { $1 } }
        return out
    }

    /// Calls `body` with each app whose record differs between `old` and `self` (`was` nil: the
    /// app is new; `now` nil: it is gone), looking only into the parts that are not the same
    /// object in both (a part no change touched is shared). In no set order. `unchanged` tells
    /// two records apart (the store's row diff passes a faster check that falls back on `==`).
    public func forEachChange(from old: NotificationAppRecords,
                              unchanged: (NotificationAppRecord, NotificationAppRecord) -> Bool = (==),
                              _ body: (_ app: String, _ was: NotificationAppRecord?, _ now: NotificationAppRecord?) throws -> Void) rethrows {
        for i in 0..<Self.shardCount {
            if i < shards.count, i < old.shards.count, shards[i] === old.shards[i] { continue }
            let mine = i < shards.count ? shards[i].records : [:]
            let theirs = i < old.shards.count ? old.shards[i].records : [:]
            for (app, record) in mine {
                if let was = theirs[app] {
                    if !unchanged(was, record) { try body(app, was, record) }
                } else {
                    try body(app, nil, record)
                }
            }
            for (app, record) in theirs where mine[app] == nil { try body(app, record, nil) }
        }
    }

    /// Whether both hold the same records; a part shared by both is not looked into.
    public static func == (a: NotificationAppRecords, b: NotificationAppRecords) -> Bool {
        guard a.count == b.count else { return false }
        if a.count == 0 { return true }
        for i in 0..<shardCount {
            let x = i < a.shards.count ? a.shards[i] : nil, y = i < b.shards.count ? b.shards[i] : nil
            if let x, let y, x === y { continue }
            if (x?.records ?? [:]) != (y?.records ?? [:]) { return false }
        }
        return true
    }

    /// Iterates `(key, value)` pairs, part by part, in no set order.
    public struct Iterator: IteratorProtocol {
        private var shards: IndexingIterator<[Shard]>
        private var current: Dictionary<String, NotificationAppRecord>.Iterator?
        fileprivate init(_ shards: [Shard]) { self.shards = shards.makeIterator() }
        public mutating func next() -> (key: String, value: NotificationAppRecord)? {
            while true {
                if let pair = current?.next() { return pair }
                guard let shard = shards.next() else { return nil }
                current = shard.records.makeIterator()
            }
        }
    }

    /// An iterator over the `(key, value)` pairs.
    public func makeIterator() -> Iterator { Iterator(shards) }
    /// The number of records.
    public var underestimatedCount: Int { count }

    /// Encodes the records as one JSON object of app id → record.
    public func encode(to encoder: any Encoder) throws {
        try dictionary.encode(to: encoder)
    }

    /// Decodes one JSON object of app id → record.
    /// - Throws: `DecodingError` when it is not one.
    public init(from decoder: any Decoder) throws {
        self.init(try [String: NotificationAppRecord](from: decoder))
    }
}
