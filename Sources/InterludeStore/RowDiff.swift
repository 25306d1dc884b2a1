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
    /// The state these changes lead to, and the list `seq`s it has then (for the committer: the
    /// state on disk once they are durable).
    var after: NotificationState
    var layoutAfter: RowLayout

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

/// One of the three ordered tables.
enum ListTableName: Sendable { case pending, delivered, decisionLog }

/// A list item, typed (encoded when written).
enum ListValue: Sendable {
    case pending(PendingNotification)
    case delivered(DeliveredNotification)
    case decision(NotificationDecisionRecord)
}

/// A `meta` value, typed (encoded when written).
enum MetaValue: Sendable {
    case clock(NotificationTime)
    case focus(NotificationFocusState)
    case flag(Bool)
    case history(NotificationAlertHistory)
    case held([HeldNotification])
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

/// Where the state's parts are on disk: the `seq` of each item of the three ordered lists, index
/// for index, and which `meta` rows exist (a value never saved is absent, and loads as its default).
struct RowLayout: Sendable, Equatable {
    var pending: [Int64] = []
    var delivered: [Int64] = []
    var decisionLog: [Int64] = []
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

        // Apps, by id.
        var added = 0
        for (app, record) in new.apps {
            if let was = old.apps[app] {
                if !same(was, record) { rows.append(.upsertApp(app, record, inserted: false)) }
            } else {
                rows.append(.upsertApp(app, record, inserted: true))
                added += 1
            }
        }
        if old.apps.count + added != new.apps.count {  // some app is gone
            for app in old.apps.keys.sorted() where new.apps[app] == nil { rows.append(.deleteApp(app)) }
        }

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
        shadow = new
        seqs = after
        return NotificationRowChanges(rows: rows, after: new, layoutAfter: after)
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
    static func diff<T: Equatable>(_ table: ListTableName, old: [T], seqs: [Int64], new: [T], key: (T) -> ListKey,
                                   value: (T) -> ListValue, into rows: inout [RowChange]) -> [Int64] {
        let n0 = old.count, n1 = new.count
        func prefix(from d: Int) -> Int {
            var p = 0
            while d + p < n0, p < n1, same(old[d + p], new[p]) { p += 1 }
            return p
        }
        // Head: the items kept in front, after `dropped` items removed from the front.
        var dropped = 0
        var p = prefix(from: 0)
        if p == 0, n1 > 0 {
            for d in stride(from: 1, through: min(8, n0 - 1), by: 1) where same(old[d], new[0]) {
                dropped = d
                p = prefix(from: d)
                break
            }
        }
        // Tail: the items kept at the end.
        var s = 0
        while s < n0 - dropped - p, s < n1 - p, same(old[n0 - 1 - s], new[n1 - 1 - s]) { s += 1 }
        if dropped == 0, p == n0, n0 == n1 { return seqs }  // unchanged

        let oldWindow = (dropped + p)..<(n0 - s)
        let newWindow = p..<(n1 - s)
        var deletes: [Int64] = Array(seqs[0..<dropped])
        var updates: [RowChange] = []
        var inserts: [RowChange] = []

        // The window: match by key (the n-th occurrence of a key with the n-th), keep matches
        // whose numbers still ascend.
        var oldByKey: [Occurrence: Int] = [:]
        var counts: [ListKey: Int] = [:]
        for i in oldWindow {
            let k = key(old[i])
            let n = counts[k, default: 0]
            counts[k] = n + 1
            oldByKey[Occurrence(key: k, n: n)] = i
        }
        counts.removeAll(keepingCapacity: true)
        var matched: [Int?] = []
        matched.reserveCapacity(newWindow.count)
        var last = p > 0 ? seqs[dropped + p - 1] : Int64.min
        var kept = Set<Int>()
        for j in newWindow {
            let k = key(new[j])
            let n = counts[k, default: 0]
            counts[k] = n + 1
            if let i = oldByKey[Occurrence(key: k, n: n)], seqs[i] > last {
                matched.append(i)
                kept.insert(i)
                last = seqs[i]
            } else {
                matched.append(nil)
            }
        }
        var out = Array(seqs[dropped..<(dropped + p)])
        var windowSeqs: [Int64?] = matched.map { $0.map { seqs[$0] } }
        let below: Int64? = p > 0 ? seqs[dropped + p - 1] : nil
        let above: Int64? = s > 0 ? seqs[n0 - s] : nil
        if fillGaps(&windowSeqs, below: below, above: above) {
            for i in oldWindow where !kept.contains(i) { deletes.append(seqs[i]) }
            for (w, j) in newWindow.enumerated() {
                let seq = windowSeqs[w]!
                let k = key(new[j])
                if let i = matched[w] {
                    if !same(old[i], new[j]) { updates.append(.update(table, seq: seq, app: k.app, identifier: k.identifier, value(new[j]))) }
                } else {
                    inserts.append(.insert(table, seq: seq, app: k.app, identifier: k.identifier, value(new[j])))
                }
                out.append(seq)
            }
            out += seqs[(n0 - s)..<n0]
        } else {
            // No room between two kept numbers: renumber the whole list 1…n.
            deletes = seqs
            updates = []
            inserts = []
            out = []
            for (j, item) in new.enumerated() {
                let k = key(item)
                inserts.append(.insert(table, seq: Int64(j + 1), app: k.app, identifier: k.identifier, value(item)))
                out.append(Int64(j + 1))
            }
        }
        rows += deletes.map { .delete(table, seq: $0) }
        rows += updates
        rows += inserts
        return out
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
