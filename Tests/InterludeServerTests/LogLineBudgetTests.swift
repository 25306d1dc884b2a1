@testable import InterludeEngine
import Testing

/// N16 and the log's size: ``LogLineBudget``, the token bucket of the engine's per-notification
/// log lines (pure: the tests pass the time).
@Suite struct LogLineBudgetTests {
    /// Each case: at `perSecond` with a burst of `burst`, events "l@t" (a line at time t, monotonic
    /// seconds) and "t@t" (the engine's tick); what each gets: a line "w" written, "begins" the
    /// first left out, "-" left out, "over n/s" written after a flood of n left out over s
    /// seconds; a tick "sum n/s", "quiet", "over n/s" or "none" (no flood).
    @Test(arguments: [
        (1.0, 2.0, ["l@0", "l@0", "l@0", "l@0"], ["w", "w", "begins", "-"]),
        // Refilled up to the burst, not beyond: after 10 s, 2 lines at once, not 10.
        (1.0, 2.0, ["l@0", "l@10", "l@10", "l@10"], ["w", "w", "w", "begins"]),
        // A steady rate at the refill rate is written whole (ten refills of a tenth are a line).
        (10.0, 1.0, ["l@0", "l@0.1", "l@0.2", "l@0.3", "l@0.4"], ["w", "w", "w", "w", "w"]),
        // Over the rate: the flood lasts until the bucket is full again, whatever comes meanwhile.
        (10.0, 1.0, ["l@0", "l@0.05", "l@0.1", "l@0.15", "l@0.2"], ["w", "begins", "-", "-", "-"]),
        // Ticks sum up each stretch of the flood; a tick with nothing left out is quiet; the
        // flood is over at the first tick that finds the bucket full (the lines under the rate
        // for burst / rate seconds).
        (1.0, 4.0, ["t@0", "l@0", "l@0", "l@0", "l@0", "l@0", "l@1", "t@2", "t@4", "l@4.5", "t@5", "t@8"],
         ["none", "w", "w", "w", "w", "begins", "-", "sum 2/2.0", "quiet", "-", "sum 1/1.0", "over 0/3.0"]),
        // A line that finds the flood over before the tick does says so itself.
        (1.0, 2.0, ["l@0", "l@0", "l@0", "l@1", "l@3"], ["w", "w", "begins", "-", "over 2/3.0"]),
        // Time that goes back (a clock read on two threads) refills nothing and breaks nothing.
        (1.0, 1.0, ["l@5", "l@4", "l@5.5", "l@7.5"], ["w", "begins", "-", "over 2/3.5"]),
    ])
    func linesAreWrittenWithinTheBudget_N16(perSecond: Double, burst: Double, events: [String], expected: [String]) {
        var budget = LogLineBudget(perSecond: perSecond, burst: burst)
        var got: [String] = []
        func r(_ s: Double) -> Double { (s * 100).rounded() / 100 }
        for e in events {
            let t = Double(e.dropFirst(2))!
            if e.hasPrefix("t") {
                switch budget.tick(at: t) {
                case nil: got.append("none")
                case let .sum(count, seconds)?: got.append("sum \(count)/\(r(seconds))")
                case .quiet?: got.append("quiet")
                case let .over(count, seconds)?: got.append("over \(count)/\(r(seconds))")
                }
                continue
            }
            switch budget.admit(at: t) {
            case .write: got.append("w")
            case let .writeAfterFlood(count, seconds): got.append("over \(count)/\(r(seconds))")
            case .floodBegins: got.append("begins")
            case .leaveOut: got.append("-")
            }
        }
        #expect(got == expected)
    }
}
