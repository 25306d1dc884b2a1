/// The `k` first of `items` in the order `precedes` gives, in that order: one pass that keeps the
/// `k` first seen so far (about one comparison per item), not a sort of them all (one sort when
/// `k` is over 32 and over a quarter of the items, when their count is known: a lazy filter's is
/// not, and it stays one pass); of equal ones, those that came first. For
/// bounded listings over many items (`status`: the sessions, and the sessions interrupting one,
/// thousands in a pile of exclusive activations, A6) and the least recently seen app records to
/// forget (`maxApps`).
public func firstInOrder<S: Sequence>(_ k: Int, of items: S, by precedes: (S.Element, S.Element) -> Bool) -> [S.Element] {
    guard k > 0 else { return [] }
    // Many kept, and a good part of all the items: inserting each costs more than one sort of
    // them all (by place for equal ones). A few of many (`status`) stay one pass, and so does a
    // sequence that does not know its count (`status` filters its sessions lazily: an
    // underestimated count of 0 sorted every session at each `status`).
    let known = items.underestimatedCount
    if k > 32, known > 0, k * 4 > known {
        return Array(items.enumerated().sorted { a, b in
            precedes(a.element, b.element) || (!precedes(b.element, a.element) && a.offset < b.offset)
        }.prefix(k).map(\.element))
    }
    var kept: [S.Element] = []
    kept.reserveCapacity(k)
    for x in items {
        if kept.count == k {
            guard precedes(x, kept[k - 1]) else { continue }
            kept.removeLast()
        }
        // After the kept ones it does not precede: equal ones keep the order they came in.
        var i = kept.count
        while i > 0, precedes(x, kept[i - 1]) { i -= 1 }
        kept.insert(x, at: i)
    }
    return kept
}
