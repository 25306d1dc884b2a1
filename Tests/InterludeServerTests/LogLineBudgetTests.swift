@testable import InterludeEngine
import Testing

/// N16 and the log's size: ``LogLineBudget``, the token bucket of the engine's per-notification
/// log lines (pure: the tests pass the time).
@Suite struct LogLineBudgetTests {
    /// Each case: lines at these times (monotonic seconds), at `perSecond` with a burst of `burst`
    /// and a sum every 10 s; what each gets: "w" written, "begins" the first left out, "-" left
    /// out, "sum n/s" left out and n summed over s seconds, "over n/s" written after a flood of n
    /// left out over s seconds.
    @Test(arguments: [
        (1.0, 2.0, [0.0, 0, 0, 0], ["w", "w", "begins", "-"]),
        // Refilled up to the burst, not beyond: after 10 s, 2 lines at once, not 10.
        (1.0, 2.0, [0.0, 10, 10, 10], ["w", "w", "w", "begins"]),
        // A steady rate at the refill rate is written whole (ten refills of a tenth are a line).
        (10.0, 1.0, [0.0, 0.1, 0.2, 0.3, 0.4], ["w", "w", "w", "w", "w"]),
        // Over the rate: the flood lasts until the bucket is full again, whatever comes meanwhile.
        (10.0, 1.0, [0.0, 0.05, 0.1, 0.15, 0.2], ["w", "begins", "-", "-", "-"]),
        // The flood is over once the lines came under the rate long enough to fill the bucket
        // (2 s at 1 a second and a burst of 2); the count is of those left out, since it began.
        (1.0, 2.0, [0.0, 0, 0, 0, 1.0, 3.0], ["w", "w", "begins", "-", "-", "over 3/3.0"]),
        // Sums every 10 s during a long flood (a line every 5 s, over 0.1 a second), each of the
        // lines since the one before; over after 10 s without a line.
        (0.1, 1.0, [0.0, 0, 5, 10, 15, 20, 25, 40], ["w", "begins", "-", "sum 3/10.0", "-", "sum 2/10.0", "-", "over 1/20.0"]),
        // Time that goes back (a clock read on two threads) refills nothing and breaks nothing.
        (1.0, 1.0, [5.0, 4.0, 5.5, 7.5], ["w", "begins", "-", "over 2/3.5"]),
    ])
    func linesAreWrittenWithinTheBudget_N16(perSecond: Double, burst: Double, times: [Double], expected: [String]) {
        var budget = LogLineBudget(perSecond: perSecond, burst: burst)
        var got: [String] = []
        func r(_ s: Double) -> Double { (s * 100).rounded() / 100 }
        for t in times {
            switch budget.admit(at: t) {
            case .write: got.append("w")
            case let .writeAfterFlood(count, seconds): got.append("over \(count)/\(r(seconds))")
            case .floodBegins: got.append("begins")
            case .leaveOut: got.append("-")
            case let .leaveOutAndSum(count, seconds): got.append("sum \(count)/\(r(seconds))")
            }
        }
        #expect(got == expected)
    }
}
