/// How many of the engine's routine log lines are written during a flood: a token bucket of
/// `burst` lines, refilled at `perSecond` lines a second (monotonic seconds, the engine's clock).
///
/// The engine logs a line per notification it decides (delivered, held, refused, removed over N11,
/// a remote message's receipt). During a flood (an app syncing thousands of messages, a fleet's
/// backlog) those lines were the log: 162 MB in 15 minutes of a stranger's flood, with nothing to
/// bound them when the daemon runs by hand (the user's service has the journal's rate limit).
///
/// Within the budget every line is written. The first line over it starts a flood: from then on
/// the lines are counted, not written, until the bucket has filled up again (the lines came below
/// `perSecond` for `burst / perSecond` seconds). The caller asks ``tick(at:)`` every `sumEvery`
/// seconds during a flood: it sums up the lines left out since the last sum, and says when the
/// flood is over. Each decision stays in the N16 decision log (`interlude explain ID`), so only
/// the log's copy is left out. Pure and deterministic: the caller passes the time.
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
        /// A flood is over (the tick that would have said so had not come yet): say that `count`
        /// lines were left out in the last `seconds`, then write this one.
        case writeAfterFlood(count: Int, seconds: Double)
        /// Leave it out: the first line of a flood (say that lines are left out from now on, and
        /// tick every `sumEvery` seconds).
        case floodBegins
        /// Leave it out.
        case leaveOut
    }

    /// What a tick during a flood says.
    public enum Tick: Equatable, Sendable {
        /// `count` lines were left out in the last `seconds`; the flood goes on (tick again).
        case sum(count: Int, seconds: Double)
        /// None was left out since the last tick, but the flood is not over yet (tick again).
        case quiet
        /// The flood is over: `count` lines were left out in the last `seconds` (no more ticks).
        case over(count: Int, seconds: Double)
    }

    /// Decides one line at `now` (monotonic seconds): takes its token, if there is one.
    public mutating func admit(at now: Double) -> Verdict {
        refill(at: now)
        if flooding {
            if let over = endIfFull(at: now) {
                tokens -= 1
                guard case let .over(count, seconds) = over else { return .write }
                return .writeAfterFlood(count: count, seconds: seconds)
            }
            tokens = max(0, tokens - 1)
            leftOut += 1
            return .leaveOut
        }
        if tokens >= 1 - Self.epsilon {
            tokens = max(0, tokens - 1)
            return .write
        }
        flooding = true
        tokens = 0  // the flood drains the bucket from its first line on
        leftOut = 1
        leftOutSince = now
        return .floodBegins
    }

    /// During a flood, what to say at `now` (every `sumEvery` seconds); nil when there is no flood.
    public mutating func tick(at now: Double) -> Tick? {
        guard flooding else { return nil }
        refill(at: now)
        if let over = endIfFull(at: now) { return over }
        defer { leftOut = 0; leftOutSince = now }
        return leftOut == 0 ? .quiet : .sum(count: leftOut, seconds: max(0, now - leftOutSince))
    }

    /// Ten refills of a tenth are one line, whatever the rounding.
    private static let epsilon = 1e-9

    private mutating func refill(at now: Double) {
        guard let last = lastRefill else { lastRefill = now; return }
        guard now > last else { return }  // a clock read that goes back refills nothing
        tokens = min(burst, tokens + (now - last) * perSecond)
        lastRefill = now
    }

    /// Ends the flood if the bucket is full again: what was left out since the last sum.
    private mutating func endIfFull(at now: Double) -> Tick? {
        guard tokens >= burst - Self.epsilon else { return nil }
        flooding = false
        defer { leftOut = 0 }
        return .over(count: leftOut, seconds: max(0, now - leftOutSince))
    }
}
