/// How many of the engine's routine log lines are written during a flood: a token bucket of
/// `burst` lines, refilled at `perSecond` lines a second (monotonic seconds, the engine's clock).
///
/// The engine logs a line per notification it decides (delivered, held, refused, removed over N11,
/// a remote message's receipt). During a flood (an app syncing thousands of messages, a fleet's
/// backlog) those lines were the log: 162 MB in 15 minutes of a stranger's flood, with nothing to
/// bound them when the daemon runs by hand (the user's service has the journal's rate limit).
///
/// Within the budget every line is written. The first line over it starts a flood: from then on
/// the lines are counted, not written, with a sum every `sumEvery` seconds, until the bucket has
/// filled up again (the lines came below `perSecond` for `burst / perSecond` seconds); the next
/// line then says how many were left out since the last sum, and is written. Each decision stays
/// in the N16 decision log (`interlude explain ID`), so only the log's copy is left out. Pure and
/// deterministic: the caller passes the time.
public struct LogLineBudget: Sendable, Equatable {
    /// Lines a second written once the burst is spent (the refill rate; > 0).
    public let perSecond: Double
    /// Lines written at once before the rate applies (the bucket's size; ≥ 1).
    public let burst: Double
    /// Seconds between two sums during a flood.
    public let sumEvery: Double
    private var tokens: Double
    private var lastRefill: Double?
    private var flooding = false
    /// Lines left out since the flood began or since the last sum.
    public private(set) var leftOut = 0
    /// When the flood began or the last sum was said (monotonic seconds).
    private var leftOutSince = 0.0

    /// - Parameters:
    ///   - perSecond: the sustained rate, in lines a second (> 0).
    ///   - burst: the lines written at once before the rate applies (≥ 1).
    ///   - sumEvery: seconds between two sums of the lines left out during a flood.
    public init(perSecond: Double, burst: Double, sumEvery: Double = 10) {
        self.perSecond = perSecond
        self.burst = max(1, burst)
        self.sumEvery = sumEvery
        tokens = self.burst
    }

    /// What to do with one routine line.
    public enum Verdict: Equatable, Sendable {
        /// Write it (no flood).
        case write
        /// A flood is over: say that `count` lines were left out in the last `seconds`, then
        /// write this one.
        case writeAfterFlood(count: Int, seconds: Double)
        /// Leave it out: the first line of a flood (say that lines are left out from now on).
        case floodBegins
        /// Leave it out.
        case leaveOut
        /// Leave it out, and say that `count` lines were left out in the last `seconds` (this
        /// one included).
        case leaveOutAndSum(count: Int, seconds: Double)
    }

    /// Decides one line at `now` (monotonic seconds): takes its token, if there is one.
    public mutating func admit(at now: Double) -> Verdict {
        if let last = lastRefill {
            if now > last {
                tokens = min(burst, tokens + (now - last) * perSecond)
                lastRefill = now
            }
        } else {
            lastRefill = now
        }
        // Ten refills of a tenth are one line, whatever the rounding.
        let epsilon = 1e-9
        if flooding {
            if tokens >= burst - epsilon {
                flooding = false
                tokens -= 1
                let verdict = Verdict.writeAfterFlood(count: leftOut, seconds: max(0, now - leftOutSince))
                leftOut = 0
                return verdict
            }
            tokens = max(0, tokens - 1)
            leftOut += 1
            guard now - leftOutSince >= sumEvery - epsilon else { return .leaveOut }
            let verdict = Verdict.leaveOutAndSum(count: leftOut, seconds: now - leftOutSince)
            leftOut = 0
            leftOutSince = now
            return verdict
        }
        if tokens >= 1 - epsilon {
            tokens = max(0, tokens - 1)
            return .write
        }
        flooding = true
        tokens = 0  // the flood drains the bucket from its first line on
        leftOut = 1
        leftOutSince = now
        return .floodBegins
    }
}
