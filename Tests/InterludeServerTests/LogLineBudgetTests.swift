@testable import InterludeEngine
import Testing

/// N16 and the log's size: ``LogLineBudget``, the token bucket of the engine's per-notification
/// log lines (pure: the tests pass the time).
@Suite struct LogLineBudgetTests {
    /// Each case: at `perSecond` with a burst of `burst` and ticks every 10 s, events "l@t" (a
    /// line at time t, monotonic seconds), "t@t" (the engine's tick) and "f@t" (a reload or the
    /// stop ending a flood); what each gets: a line "w" written, "begins" the first left out, "-"
    /// left out; a tick or an end "sum n/s", "over n/s" (n left out over s seconds) or "none".
    @Test(arguments: [
        (1.0, 2.0, ["l@0", "l@0", "l@0", "l@0"], ["w", "w", "begins", "-"]),
        // Refilled up to the burst, not beyond: after 10 s, 2 lines at once, not 10.
        (1.0, 2.0, ["l@0", "l@10", "l@10", "l@10"], ["w", "w", "w", "begins"]),
        // A steady rate at the refill rate is written whole (ten refills of a tenth are a line).
        (10.0, 1.0, ["l@0", "l@0.1", "l@0.2", "l@0.3", "l@0.4"], ["w", "w", "w", "w", "w"]),
        // Over the rate: counted until a tick, whatever comes meanwhile.
        (10.0, 1.0, ["l@0", "l@0.05", "l@0.1", "l@0.15", "l@0.2"], ["w", "begins", "-", "-", "-"]),
        // A tick sums up a stretch over the rate (3 lines in 2 s at 1 a second) and the flood
        // goes on; the first stretch within it ends the flood with its count (2 in 2 s), and the
        // bucket is full again.
        (1.0, 2.0, ["t@0", "l@0", "l@0", "l@0", "l@1", "l@1.5", "t@2", "l@3", "l@3.5", "t@4", "l@4", "l@4", "l@4"],
         ["none", "w", "w", "begins", "-", "-", "sum 3/2.0", "-", "-", "over 2/2.0", "w", "w", "begins"]),
        // A burst alone is over at the first tick, with what it left out.
        (1.0, 1.0, ["l@0", "l@0", "l@0", "t@10", "t@20"], ["w", "begins", "-", "over 2/10.0", "none"]),
        // Ended at once (a reload, the stop): the count so far; then nothing to end.
        (1.0, 1.0, ["l@0", "l@0", "l@0", "f@0.5", "f@1", "l@1"], ["w", "begins", "-", "over 2/0.5", "none", "w"]),
        // Time that goes back (a clock read on two threads) refills nothing and breaks nothing.
        (1.0, 1.0, ["l@5", "l@4", "l@5.5", "t@6"], ["w", "begins", "-", "over 2/2.0"]),
    ])
    func linesAreWrittenWithinTheBudget_N16(perSecond: Double, burst: Double, events: [String], expected: [String]) {
        var budget = LogLineBudget(perSecond: perSecond, burst: burst)
        var got: [String] = []
        func r(_ s: Double) -> Double { (s * 100).rounded() / 100 }
        func said(_ t: LogLineBudget.Tick?) -> String {
            switch t {
            case nil: "none"
            case let .sum(count, seconds)?: "sum \(count)/\(r(seconds))"
            case let .over(count, seconds)?: "over \(count)/\(r(seconds))"
            }
        }
        for e in events {
            let t = Double(e.dropFirst(2))!
            if e.hasPrefix("t") { got.append(said(budget.tick(at: t))); continue }
            if e.hasPrefix("f") { got.append(said(budget.finish(at: t))); continue }
            switch budget.admit(at: t) {
            case .write: got.append("w")
            case .floodBegins: got.append("begins")
            case .leaveOut: got.append("-")
            }
        }
        #expect(got == expected)
    }
}
