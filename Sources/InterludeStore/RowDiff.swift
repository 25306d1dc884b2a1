#if canImport(Glibc)
import Glibc
#endif
import InterludePolicy

/// The rows one change of the notification state writes (N15, issue 9): the app records, list
/// items and meta values that differ from the state the store last took, as typed values. They are
/// encoded to JSON only when written (off the engine's actor, by the committer), so what a change
/// costs its caller is comparing values, and what it costs the disk is a few row writes.
public struct NotificationRowChanges: Sendable {
    /// The row operations, in the order they must run (per table: deletes, updates, inserts).
    var rows: [RowChange] = []

    /// No row to write.
    public var isEmpty: Bool { rows.isEmpty }
    /// How many rows the changes insert, update and delete.
    public var stats: StoreSaveStats {
        var s = StoreSaveStats()
        for r in rows {
            switch r {
            case .upsertApp(_, _, let inserted), .upsertMeta(_, _, let inserted):
                if inserted { s.inserted += 1 } else { s.updated += 1 }
            case .deleteApp, .deleteMeta, .delete: s.deleted += 1
            case .insert: s.inserted += 1
            case .update: s.updated += 1
            }
        }
        return s
    }
}

/// One of the four ordered tables.
enum ListTableName: Sendable, Hashable { case pending, delivered, decisionLog, owedReceipts }

/// A list item, typed (encoded when written).
enum ListValue: Sendable {
    case pending(PendingNotification)
    case delivered(DeliveredNotification)
    case decision(NotificationDecisionRecord)
    /// A remote receipt not yet acknowledged by the broker (issue 11).
    case receipt(OwedReceipt)
}

/// A `meta` value, typed (encoded when written).
enum MetaValue: Sendable {
    case clock(NotificationTime)
    case focus(NotificationFocusState)
    case flag(Bool)
    case history(NotificationAlertHistory)
    case held([HeldNotification])
    /// The recent remote message ids (issue 11, REMOTE.md "Exactly once").
    case strings([String])
}

/// One row operation.
enum RowChange: Sendable {
    case upsertApp(String, NotificationAppRecord, inserted: Bool)
    case deleteApp(String)
    case upsertMeta(NotificationStore.MetaKey, MetaValue, inserted: Bool)
    case deleteMeta(NotificationStore.MetaKey)
    case insert(ListTableName, seq: Int64, app: String, identifier: String, ListValue)
    case update(ListTableName, seq: Int64, app: String, identifier: String, ListValue)
    case delete(ListTableName, seq: Int64)
}

/// Where the state's parts are on disk: the `seq` of each item of the four ordered lists, index
/// for index, and which `meta` rows exist (a value never saved is absent, and loads as its default).
struct RowLayout: Sendable, Equatable {
    var pending: [Int64] = []
    var delivered: [Int64] = []
    var decisionLog: [Int64] = []
    var owedReceipts: [Int64] = []
    var meta: Set<NotificationStore.MetaKey> = []
}

/// Turns successive `NotificationState`s into row changes (N15). It remembers the state it last
/// took (`shadow`) and the `seq` of every list item, and compares the next state with it:
///
/// - apps and meta values: each compared with its remembered value (an unchanged value is a copy
///   of the remembered one, so the comparison is a few pointer comparisons);
/// - lists: the common head and tail are skipped (a list the policy appends to, trims at the front
///   or changes in one place keeps almost all of it), and only the window between is matched by
///   app and identifier. Kept items keep their `seq`; new and moved ones get numbers in the gaps,
///   or the whole list is renumbered if a gap is too small (rare: only an insert between two
///   adjacent numbers).
///
/// Pure and single-owner: no I/O.
struct NotificationRowDiffer: Sendable {
    private(set) var shadow: NotificationState
    private(set) var seqs: RowLayout

    /// A differ whose rows on disk are `state` numbered by `seqs`.
    init(state: NotificationState, seqs: RowLayout) {
        shadow = state
        self.seqs = seqs
    }

    /// The rows that turn the remembered state into `new`; `new` is remembered from now on.
    mutating func changes(to new: NotificationState) -> NotificationRowChanges {
        var rows: [RowChange] = []
        let old = shadow

        // Apps, by id: only the parts of the map a change touched are compared (issue 9: every
        // app's record was, on every commit).
        var gone: [String] = []
        new.apps.forEachChange(from: old.apps, unchanged: { same($0, $1) }) { app, was, now in
            if let now { rows.append(.upsertApp(app, now, inserted: was == nil)) } else { gone.append(app) }
        }
        for app in gone.sorted() { rows.append(.deleteApp(app)) }

        // Meta values.
        var after = seqs
        func meta<T: Equatable>(_ key: NotificationStore.MetaKey, _ a: T, _ b: T, _ wrap: (T) -> MetaValue) {
            if !same(a, b) || !after.meta.contains(key) {
                rows.append(.upsertMeta(key, wrap(b), inserted: !after.meta.contains(key)))
                after.meta.insert(key)
            }
        }
        switch (old.clock, new.clock) {
        case (_, let c?): meta(.clock, old.clock ?? c, c, MetaValue.clock)
        case (_?, nil) where after.meta.contains(.clock):
            rows.append(.deleteMeta(.clock))
            after.meta.remove(.clock)
        default: break
        }
        meta(.focus, old.focus, new.focus, MetaValue.focus)
        meta(.ringerSilent, old.ringerSilent, new.ringerSilent, MetaValue.flag)
        meta(.callActive, old.callActive, new.callActive, MetaValue.flag)
        meta(.history, old.history, new.history, MetaValue.history)
        meta(.summaryQueue, old.summaryQueue, new.summaryQueue, MetaValue.held)
        meta(.coalesced, old.coalesced, new.coalesced, MetaValue.held)
        meta(.remoteMessages, old.remoteMessages, new.remoteMessages, MetaValue.strings)

        // Lists.
        after.pending = Self.diff(.pending, old: old.pending, seqs: seqs.pending, new: new.pending,
                                  key: { ListKey(app: $0.app, identifier: $0.request.identifier, time: 0) },
                                  value: ListValue.pending, into: &rows)
        after.delivered = Self.diff(.delivered, old: old.delivered, seqs: seqs.delivered, new: new.delivered,
                                    key: { ListKey(app: $0.app, identifier: $0.request.identifier, time: 0) },
                                    value: ListValue.delivered, into: &rows)
        after.decisionLog = Self.diff(.decisionLog, old: old.decisionLog, seqs: seqs.decisionLog, new: new.decisionLog,
                                      key: { ListKey(app: $0.app, identifier: $0.identifier, time: $0.time.secondsSince1970) },
                                      value: ListValue.decision, into: &rows)
        if !old.owedReceipts.isEmpty || !new.owedReceipts.isEmpty {
            after.owedReceipts = Self.diff(.owedReceipts, old: old.owedReceipts, seqs: seqs.owedReceipts, new: new.owedReceipts,
                                           key: { ListKey(app: $0.app, identifier: $0.messageID, time: $0.time) },
                                           value: ListValue.receipt, into: &rows)
        }
        shadow = new
        seqs = after
        return NotificationRowChanges(rows: rows)
    }

    /// How a list item is recognized across changes: a notification by app and identifier (its
    /// row is updated when its content changes), a decision record also by its time.
    struct ListKey: Hashable {
        var app: String
        var identifier: String
        var time: Double
    }

    /// The n-th occurrence (from 0) of a key in a list window.
    struct Occurrence: Hashable {
        var key: ListKey
        var n: Int
    }

    /// Appends to `rows` what turns `old` (numbered `seqs`) into `new`, and returns `new`'s numbers.
    ///
    /// Walks both lists together, keeping items that are the same (compared in place, by their
    /// bytes first); where they differ it looks up to `lookahead` items ahead for the removal of a
    /// few old items or the insertion of a few new ones (what the policy does: append, trim the
    /// oldest, remove or replace one). Only what is left when that fails is matched by key.
    /// Specialized for the three element types: generic code would copy every element it looks at.
    @_specialize(where T == PendingNotification)
    @_specialize(where T == DeliveredNotification)
    @_specialize(where T == NotificationDecisionRecord)
    @_specialize(where T == OwedReceipt)
    static func diff<T: Equatable>(_ table: ListTableName, old: [T], seqs: [Int64], new: [T], key: (T) -> ListKey,
                                   value: (T) -> ListValue, into rows: inout [RowChange]) -> [Int64] {
        let n0 = old.count, n1 = new.count
        let lookahead = 8
        // For each new item: the old index it keeps (nil = new row); and the old indices dropped.
        var keptFrom: [Int?] = []
        keptFrom.reserveCapacity(n1)
        var dropped: [Int] = []
        var i = 0, j = 0
        // Far scans left (see below): a bound, so that lists in a new order cost O(n), not O(n²).
        var farScans = 2
        old.withUnsafeBufferPointer { ob in
            new.withUnsafeBufferPointer { nb in
                func eq(_ a: Int, _ b: Int) -> Bool { sameInPlace(ob.baseAddress! + a, nb.baseAddress! + b) }
                func identical(_ a: Int, _ b: Int) -> Bool {
                    memcmp(UnsafeRawPointer(ob.baseAddress! + a), UnsafeRawPointer(nb.baseAddress! + b), MemoryLayout<T>.size) == 0
                }
                walk: while i < n0, j < n1 {
                    if eq(i, j) {
                        keptFrom.append(i)
                        i += 1
                        j += 1
                        continue
                    }
                    for k in 1...lookahead {
                        if i + k < n0, eq(i + k, j) {  // old[i..<i+k] removed
                            dropped += i..<(i + k)
                            i += k
                            continue walk
                        }
                        if j + k < n1, eq(i, j + k) {  // new[j..<j+k] inserted
                            keptFrom += repeatElement(nil, count: k)
                            j += k
                            continue walk
                        }
                    }
                    // More than `lookahead` old items removed at once: a log trimmed by a batch
                    // (16 decisions of a pipelined burst drop the 16 oldest). Found by the bytes
                    // of the item (an unchanged item is the same box), one pass, instead of
                    // matching the rest of both lists by key (12 % of the daemon, issue 9).
                    if farScans > 0 {
                        farScans -= 1
                        if let k = (min(i + lookahead + 1, n0)..<n0).first(where: { identical($0, j) }) {
                            dropped += i..<k
                            i = k
                            continue walk
                        }
                    }
                    break
                }
            }
        }
        // What is left: the common tail, then the middle matched by key (the n-th occurrence of a
        // key with the n-th), kept where the numbers still ascend.
        var tail = 0
        var byKey: [Int] = []  // new indices kept by key: their value may have changed
        old.withUnsafeBufferPointer { ob in
            new.withUnsafeBufferPointer { nb in
                while tail < n0 - i, tail < n1 - j, sameInPlace(ob.baseAddress! + (n0 - 1 - tail), nb.baseAddress! + (n1 - 1 - tail)) {
                    tail += 1
                }
            }
        }
        if i < n0 - tail || j < n1 - tail {
            var oldByKey: [Occurrence: Int] = [:]
            var counts: [ListKey: Int] = [:]
            for x in i..<(n0 - tail) {
                let k = key(old[x])
                let n = counts[k, default: 0]
                counts[k] = n + 1
                oldByKey[Occurrence(key: k, n: n)] = x
            }
            counts.removeAll(keepingCapacity: true)
            var last = keptFrom.last(where: { $0 != nil }).flatMap { $0.map { seqs[$0] } } ?? Int64.min
            var used = Set<Int>()
            for y in j..<(n1 - tail) {
                let k = key(new[y])
                let n = counts[k, default: 0]
                counts[k] = n + 1
                if let x = oldByKey[Occurrence(key: k, n: n)], seqs[x] > last {
                    keptFrom.append(x)
                    used.insert(x)
                    byKey.append(y)
                    last = seqs[x]
                } else {
                    keptFrom.append(nil)
                }
            }
            for x in i..<(n0 - tail) where !used.contains(x) { dropped.append(x) }
        }
        keptFrom += ((n0 - tail)..<n0).map { Optional($0) }

        var numbers: [Int64?] = keptFrom.map { $0.map { seqs[$0] } }
        var deletes: [RowChange] = []
        var updates: [RowChange] = []
        var inserts: [RowChange] = []
        if fillGaps(&numbers, below: nil, above: nil) {
            deletes = dropped.map { .delete(table, seq: seqs[$0]) }
            for y in byKey where !same(old[keptFrom[y]!], new[y]) {
                let k = key(new[y])
                updates.append(.update(table, seq: seqs[keptFrom[y]!], app: k.app, identifier: k.identifier, value(new[y])))
            }
            for (y, from) in keptFrom.enumerated() where from == nil {
                let k = key(new[y])
                inserts.append(.insert(table, seq: numbers[y]!, app: k.app, identifier: k.identifier, value(new[y])))
            }
            if deletes.isEmpty, updates.isEmpty, inserts.isEmpty { return seqs }  // unchanged
        } else {
            // No room between two kept numbers: renumber the whole list 1…n.
            deletes = seqs.map { .delete(table, seq: $0) }
            numbers = []
            for (y, item) in new.enumerated() {
                let k = key(item)
                inserts.append(.insert(table, seq: Int64(y + 1), app: k.app, identifier: k.identifier, value(item)))
                numbers.append(Int64(y + 1))
            }
        }
        rows += deletes
        rows += updates
        rows += inserts
        return numbers.map { $0! }
    }

    /// Gives each nil entry a number strictly between its neighbours (`below` before the first,
    /// `above` after the last). False if some gap is too small.
    static func fillGaps(_ seqs: inout [Int64?], below: Int64?, above: Int64?) -> Bool {
        var i = 0
        while i < seqs.count {
            guard seqs[i] == nil else { i += 1; continue }
            var j = i
            while j < seqs.count, seqs[j] == nil { j += 1 }
            let count = Int64(j - i)
            let low = i > 0 ? seqs[i - 1] : below
            let high = j < seqs.count ? seqs[j] : above
            let start: Int64
            switch (low, high) {
            case (nil, nil): start = 1
            case (let b?, nil): start = b + 1
            case (nil, let a?): start = a - count
            case (let b?, let a?):
                guard a - b - 1 >= count else { return false }
                start = b + 1
            }
            for k in 0..<Int(count) { seqs[i + k] = start + Int64(k) }
            i = j
        }
        return true
    }
}

/// Whether two values are equal, first by their bytes: a value copied unchanged from the previous
/// state has the same bytes (the same string and array buffers), which is far cheaper to see than
/// comparing it field by field. Equal bytes imply equal values; unequal bytes fall back to `==`.
@inline(__always)
func same<T: Equatable>(_ a: T, _ b: T) -> Bool {
    let bitwise = withUnsafeBytes(of: a) { x in
        withUnsafeBytes(of: b) { y in x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 }
    }
    return bitwise || a == b
}

/// `same` for two list elements in place (no copy, no retain).
@inline(__always)
func sameInPlace<T: Equatable>(_ a: UnsafePointer<T>, _ b: UnsafePointer<T>) -> Bool {
    let size = MemoryLayout<T>.size
    return size == 0 || memcmp(UnsafeRawPointer(a), UnsafeRawPointer(b), size) == 0 || a.pointee == b.pointee
}
