/// How many of the engine's routine log lines are written during a flood: a token bucket of
/// `burst` lines, refilled at `perSecond` lines a second (monotonic seconds, the engine's clock).
///
/// The engine logs a line per notification it decides (delivered, held, refused, removed over N11,
/// a remote message's receipt). During a flood (an app syncing thousands of messages, a fleet's
/// backlog) those lines were the log: 162 MB in 15 minutes of a stranger's flood, with nothing to
/// bound them when the daemon runs by hand (the user's service has the journal's rate limit).
/// Over the budget the lines are counted, not written; the first one over says so, and the next
/// line written after it says how many were left out. Each decision stays in the N16 decision log
/// (`interlude explain ID`), so nothing but the log's copy is lost. Pure and deterministic: the
/// caller passes the time.
public struct LogLineBudget: Sendable, Equatable {
    /// Lines a second written once the burst is spent (the refill rate).
    public let perSecond: Double
    /// Lines written at once before the rate applies (the bucket's size).
    public let burst: Double
    private var tokens: Double
    private var lastRefill: Double?
    /// Lines left out since the last one written.
    public private(set) var leftOut = 0
    /// When the first of them was left out (monotonic seconds).
    private var leftOutSince = 0.0

    /// - Parameters:
    ///   - perSecond: the sustained rate, in lines a second (> 0).
    ///   - burst: the lines written at once before the rate applies (≥ 1).
    public init(perSecond: Double, burst: Double) {
        self.perSecond = perSecond
        self.burst = max(1, burst)
        tokens = self.burst
    }

    /// What to do with one routine line at `now` (monotonic seconds).
    public enum Verdict: Equatable, Sendable {
        /// Write it; `leftOut` lines were left out before it, from `since` (seconds before `now`).
        case write(leftOut: Int, since: Double)
        /// Leave it out; `first` when it is the first left out since a line was written (the one
        /// to say that lines are being left out).
        case leaveOut(first: Bool)
    }

    /// Takes one line's token at `now`, if there is one.
    public mutating func admit(at now: Double) -> Verdict {
        if let last = lastRefill, now > last { tokens = min(burst, tokens + (now - last) * perSecond) }
        if lastRefill == nil || now > lastRefill! { lastRefill = now }
        if tokens >= 1 - 1e-9 {  // ten refills of a tenth are one line, whatever the rounding
            tokens = max(0, tokens - 1)
            defer { leftOut = 0 }
            return .write(leftOut: leftOut, since: leftOut > 0 ? now - leftOutSince : 0)
        }
        leftOut += 1
        if leftOut == 1 { leftOutSince = now }
        return .leaveOut(first: leftOut == 1)
    }
}
