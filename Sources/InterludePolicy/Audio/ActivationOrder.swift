/// Sessions in the order of their activations (A6): pairs of an order number (a counter the
/// policy state keeps, ``AudioPolicyState/nextOrder``) and a session, sorted by the number, each
/// session at most once. Who interrupts whom follows from it: a session activated later, of the
/// class that interrupts, interrupts every holder of the class activated before it, and stays one
/// of its interrupters for as long as both hold their activations. So a pile of exclusive
/// activations is a list of n, not n² interrupter entries.
///
/// New activations come last (an append); a session leaves from anywhere (a binary search and a
/// shift of the rest: at the 8,192 sessions the server allows, some 100 KB moved at most).
struct ActivationOrder: Sendable, Equatable {
    private(set) var orders: [Int] = []
    private(set) var ids: [AudioSessionID] = []

    var isEmpty: Bool { orders.isEmpty }
    var count: Int { orders.count }
    /// The latest order number; nil when empty.
    var last: Int? { orders.last }
    /// The earliest order number; nil when empty.
    var first: Int? { orders.first }

    /// The index of the first entry whose number is `order` or later.
    private func lowerBound(_ order: Int) -> Int {
        var lo = 0, hi = orders.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if orders[mid] < order { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Adds `id` at `order` (a number no other entry has).
    mutating func insert(_ order: Int, _ id: AudioSessionID) {
        if let last = orders.last, order < last {
            let i = lowerBound(order)
            orders.insert(order, at: i)
            ids.insert(id, at: i)
        } else {
            orders.append(order)
            ids.append(id)
        }
    }

    /// Removes the entry at `order` (nothing if there is none).
    mutating func remove(_ order: Int) {
        let i = lowerBound(order)
        guard i < orders.count, orders[i] == order else { return }
        orders.remove(at: i)
        ids.remove(at: i)
    }

    /// Whether an entry is later than `order`.
    func hasLater(than order: Int) -> Bool { (orders.last ?? .min) > order }

    /// Whether an entry is earlier than `order`.
    func hasEarlier(than order: Int) -> Bool { (orders.first ?? .max) < order }

    /// How many entries are later than `order`.
    func countLater(than order: Int) -> Int { orders.count - lowerBound(order + 1) }

    /// The sessions later than `order`, in order.
    func later(than order: Int) -> ArraySlice<AudioSessionID> { ids[lowerBound(order + 1)...] }

    /// The sessions from `start` (included) up to `end` (excluded), in order.
    func between(_ start: Int, _ end: Int) -> ArraySlice<AudioSessionID> {
        let a = lowerBound(start), b = lowerBound(end)
        return a < b ? ids[a..<b] : []
    }

    /// The entries as (order, session) pairs, for checks.
    var entries: [(order: Int, id: AudioSessionID)] { Array(zip(orders, ids)) }

    static func == (a: Self, b: Self) -> Bool { a.orders == b.orders && a.ids == b.ids }
}
