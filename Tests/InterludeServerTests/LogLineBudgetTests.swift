@testable import InterludeEngine
import Testing

/// N16 and the log's size: ``LogLineBudget``, the token bucket of the engine's per-notification
/// log lines (pure: the tests pass the time).
@Suite struct LogLineBudgetTests {
    /// Each case: lines at these times (monotonic seconds), at `perSecond` with a burst of `burst`;
    /// what each gets: "w" written, "w<n>/<s>" written after n left out over s seconds,
    /// "first" the first left out, "-" left out.
    @Test(arguments: [
        (1.0, 2.0, [0.0, 0, 0, 0], ["w", "w", "first", "-"]),
        // A second refills one line; the line written says how many were left out, and since when.
        (1.0, 2.0, [0.0, 0, 0, 0, 1.5], ["w", "w", "first", "-", "w2/1.5"]),
        // Refilled up to the burst, not beyond: after 10 s, 2 lines at once, not 10.
        (1.0, 2.0, [0.0, 10, 10, 10], ["w", "w", "w", "first"]),
        // A steady rate at the refill rate is written whole.
        (10.0, 1.0, [0.0, 0.1, 0.2, 0.3, 0.4], ["w", "w", "w", "w", "w"]),
        // Faster than the rate: one in two.
        (10.0, 1.0, [0.0, 0.05, 0.1, 0.15, 0.2], ["w", "first", "w1/0.05", "first", "w1/0.05"]),
        // Time that goes back (a clock read on two threads) refills nothing and breaks nothing:
        // refilled from 5.0 on, and the first left out was at 4.0.
        (1.0, 1.0, [5.0, 4.0, 5.5, 6.0], ["w", "first", "-", "w2/2.0"]),
    ])
    func linesAreWrittenWithinTheBudget_N16(perSecond: Double, burst: Double, times: [Double], expected: [String]) {
        var budget = LogLineBudget(perSecond: perSecond, burst: burst)
        var got: [String] = []
        for t in times {
            switch budget.admit(at: t) {
            case let .write(leftOut, since):
                got.append(leftOut == 0 ? "w" : "w\(leftOut)/\((since * 100).rounded() / 100)")
            case .leaveOut(first: true): got.append("first")
            case .leaveOut(first: false): got.append("-")
            }
        }
        #expect(got == expected)
    }
}
