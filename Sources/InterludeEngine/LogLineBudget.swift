/// How many of the engine's routine log lines are written during a flood: a token bucket of
/// `burst` lines, refilled at `perSecond` lines a second (monotonic seconds, the engine's clock).
///
/// The engine logs a line per notification it decides (delivered, held, refused, removed over N11,
/// a remote message's receipt, its sound's S1 warning or failure). During a flood (an app syncing thousands of messages, a fleet's
/// backlog) those lines were the log: 162 MB in 15 minutes of a stranger's flood, with nothing to
/// bound them when the daemon runs by hand (the user's service has the journal's rate limit).
///
/// Within the budget every line is written. The first line over it starts a flood: from then on
/// the lines are counted, not written. The caller asks ``tick(at:)`` every `sumEvery` seconds
/// during a flood: a stretch with more lines than `perSecond` allows is summed up and the flood
/// goes on; the first stretch within it ends the flood (with its count), and the bucket is full
/// again. ``finish(at:)`` ends a flood at once (a reload that changes the rate, the daemon's
/// stop), so that no count goes unsaid. Each decision stays in the N16 decision log (`interlude
/// explain ID`, the latest ones), so only the log's copy is left out. Pure and deterministic: the
/// caller passes the time.
public struct LogLineBudget: Sendable, Equatable {
    /// Lines a second written once the burst is spent (the refill rate; > 0).
    public let perSecond: Double
    /// Lines written at once before the rate applies (the bucket's size; ≥ 1).
    public let burst: Double
    /// Seconds between two ticks (sums) during a flood.
    public let sumEvery: Double
    private var tokens: Double
    private var lastRefill: Double?
    /// Whether a flood is being counted.
    public private(set) var flooding = false
    /// Lines left out since the flood began or since the last sum.
    private var leftOut = 0
    /// When the flood began or the last sum was said (monotonic seconds).
    private var stretchStart = 0.0

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
        /// Write it.
        case write
        /// Leave it out: the first line of a flood (say that lines are left out from now on, and
        /// tick every `sumEvery` seconds).
        case floodBegins
        /// Leave it out (counted).
        case leaveOut
    }

    /// What a tick during a flood says: `count` lines were left out in the last `seconds`.
    public enum Tick: Equatable, Sendable {
        /// More than the rate allows: the flood goes on (tick again).
        case sum(count: Int, seconds: Double)
        /// Within the rate (or the flood was ended): the flood is over (no more ticks).
        case over(count: Int, seconds: Double)
    }

    /// Decides one line at `now` (monotonic seconds).
    public mutating func admit(at now: Double) -> Verdict {
        if flooding {
            leftOut += 1
            return .leaveOut
        }
        refill(at: now)
        if tokens >= 1 - Self.epsilon {
            tokens = max(0, tokens - 1)
            return .write
        }
        flooding = true
        leftOut = 1
        stretchStart = now
        return .floodBegins
    }

    /// During a flood, the sum of the stretch since the flood began or the last tick, at `now`
    /// (every `sumEvery` seconds); nil when there is no flood.
    public mutating func tick(at now: Double) -> Tick? {
        guard flooding else { return nil }
        let seconds = max(0, now - stretchStart)
        if Double(leftOut) <= perSecond * seconds + Self.epsilon { return finish(at: now) }
        defer { leftOut = 0; stretchStart = now }
        return .sum(count: leftOut, seconds: seconds)
    }

    /// Ends a flood now: what was left out since the flood began or the last sum; nil when there
    /// is no flood. The bucket is full again.
    public mutating func finish(at now: Double) -> Tick? {
        guard flooding else { return nil }
        flooding = false
        tokens = burst
        lastRefill = max(lastRefill ?? now, now)
        defer { leftOut = 0 }
        return .over(count: leftOut, seconds: max(0, now - stretchStart))
    }

    /// Ten refills of a tenth are one line, whatever the rounding.
    private static let epsilon = 1e-9

    private mutating func refill(at now: Double) {
        guard let last = lastRefill else { lastRefill = now; return }
        guard now > last else { return }  // a clock read that goes back refills nothing
        tokens = min(burst, tokens + (now - last) * perSecond)
        lastRefill = now
    }
}
