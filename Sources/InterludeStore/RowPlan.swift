/// A row of an ordered table (`pending`, `delivered`, `decision_log`): its position key `seq`
/// (ascending = array order; gaps allowed), the app and identifier it is about, and its JSON.
struct ListRow: Equatable, Sendable {
    var seq: Int64
    var app: String
    var identifier: String
    var json: String
}

/// What a save must do to one ordered table to turn its rows into the new list, touching as few
/// rows as it can: rows whose JSON and place are unchanged are left alone.
struct ListPlan: Equatable, Sendable {
    /// `seq`s of rows to delete (gone, or moved to another place); run these first.
    var deletes: [Int64] = []
    /// Rows that stay at their `seq` with new JSON.
    var updates: [ListRow] = []
    /// New rows, and moved rows at their new `seq`.
    var inserts: [ListRow] = []
    /// The table's rows after the plan, in order.
    var result: [ListRow] = []

    /// How a list item is recognized across saves.
    enum Identity {
        /// By app and identifier (a notification keeps its row when its content changes).
        case appAndIdentifier
        /// By the JSON itself (log records never change, only come and go).
        case content
    }

    /// Plans the change from `old` (ascending `seq`) to `new` (in array order; `seq` ignored).
    ///
    /// Items keep their `seq` where the kept ones still ascend (appends, removals and in-place
    /// changes — all the policy does — keep every other row); new and moved items get numbers in
    /// the gaps between kept ones, or after the last. If a gap is too small, every row is
    /// renumbered (rewritten). Duplicate keys are told apart by their occurrence number.
    static func make(old: [ListRow], new: [ListRow], identity: Identity) -> ListPlan {
        func keys(_ rows: [ListRow]) -> [String] {
            var seen: [String: Int] = [:]
            return rows.map { row in
                let base = switch identity {
                case .appAndIdentifier: row.app + "\u{0}" + row.identifier
                case .content: row.json
                }
                let n = seen[base, default: 0]
                seen[base] = n + 1
                return n == 0 ? base : base + "\u{0}#\(n)"
            }
        }
        var oldByKey: [String: ListRow] = [:]
        for (key, row) in zip(keys(old), old) { oldByKey[key] = row }
        let newKeys = keys(new)

        // Keep old numbers while they ascend; fill the gaps.
        var seqs: [Int64?] = []
        var last = Int64.min
        for key in newKeys {
            if let o = oldByKey[key], o.seq > last {
                seqs.append(o.seq)
                last = o.seq
            } else {
                seqs.append(nil)
            }
        }
        if !fillGaps(&seqs) { seqs = (0..<new.count).map { Int64($0 + 1) } }

        var plan = ListPlan()
        var kept = Set<String>()
        for (i, key) in newKeys.enumerated() {
            var row = new[i]
            row.seq = seqs[i]!
            plan.result.append(row)
            if let o = oldByKey[key], o.seq == row.seq {
                kept.insert(key)
                if o != row { plan.updates.append(row) }
            } else {
                plan.inserts.append(row)
            }
        }
        for (key, row) in zip(keys(old), old) where !kept.contains(key) { plan.deletes.append(row.seq) }
        return plan
    }

    /// Gives each nil entry a number between its kept neighbours (strictly ascending overall).
    /// False if some gap between two kept numbers is too small.
    private static func fillGaps(_ seqs: inout [Int64?]) -> Bool {
        var i = 0
        while i < seqs.count {
            guard seqs[i] == nil else { i += 1; continue }
            var j = i
            while j < seqs.count, seqs[j] == nil { j += 1 }
            let count = Int64(j - i)
            let below = i > 0 ? seqs[i - 1] : nil
            let above = j < seqs.count ? seqs[j] : nil
            let start: Int64
            switch (below, above) {
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

    /// Rows written (inserted, updated or deleted) by the plan.
    var rowsWritten: Int { deletes.count + updates.count + inserts.count }
}
