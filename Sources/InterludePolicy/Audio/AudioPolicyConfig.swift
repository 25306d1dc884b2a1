/// The numbers the A-rules name. Defaults are POLICY.md's; the daemon reads them from `Config/`
/// (`audio.*` keys).
public struct AudioPolicyConfig: Codable, Sendable, Equatable {
    /// A2: the level ducked streams are lowered to, in dB relative to their user volume (default −14 dB,
    /// i.e. 0.2 amplitude; Android's documented value). Range −60…0.
    public var duckLevelDb: Double
    /// A2: ramp time when ducking, seconds (default 0.3).
    public var duckRampDown: Double
    /// A2: ramp time when a duck ends, seconds (default 0.5).
    public var duckRampUp: Double
    /// A8: how long an interrupted session may keep playing before its streams are muted, seconds (default 0.5).
    public var enforcementGrace: Double
    /// A9: how long a ducking or interrupting session may have no running stream before it expires, seconds (default 10).
    public var transientExpiry: Double

    public init(duckLevelDb: Double = -14, duckRampDown: Double = 0.3, duckRampUp: Double = 0.5,
                enforcementGrace: Double = 0.5, transientExpiry: Double = 10) {
        self.duckLevelDb = duckLevelDb; self.duckRampDown = duckRampDown; self.duckRampUp = duckRampUp
        self.enforcementGrace = enforcementGrace; self.transientExpiry = transientExpiry
    }
}
