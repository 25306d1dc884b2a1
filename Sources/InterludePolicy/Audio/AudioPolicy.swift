/// The audio-session arbiter: a pure reducer `(state, event, now) → (state, [effect])`.
///
/// Every rule of POLICY.md part A lives in a function named after it (`a1ExclusiveActivation`,
/// `a3PauseSpokenAudio`, …). Ducks and mutes are not stored: they are derived from the sessions
/// (``AudioPolicy/output(of:in:config:)``) after every event and compared with what was last
/// applied, so nesting (A6) and reference counting (A2) hold by construction.

/// One audio session as the policy tracks it.
public struct AudioSession: Codable, Sendable, Equatable {
    public var id: AudioSessionID
    public var descriptor: AudioSessionDescriptor
    public var state: AudioSessionState = .inactive
    /// A6: the interrupters kept by name. The others follow from the order of activations
    /// (``AudioPolicyState/interrupters(of:)`` gives the whole set, non-empty exactly when
    /// `state == .interrupted`). Only a player that stops being spoken audio while interrupted
    /// under A3 keeps some here: those would no longer follow from the order.
    public var keptInterrupters: Set<AudioSessionID> = []
    /// A6: the order of the activation that made it a holder (``AudioPolicyState/nextOrder``);
    /// nil when it holds no activation.
    public var activationOrder: Int?
    /// A3: the order from which it counts as spoken audio: its activation, or when a player
    /// became spoken audio while holding one; nil when it is not spoken audio or holds none.
    public var spokenOrder: Int?
    /// The reason sent with the first `interruptionBegan` of the current interruption.
    public var interruptionReason: InterruptionReason?
    /// When the current interruption began (seconds, engine clock).
    public var interruptedAt: Double?
    /// A5: whether a stream of the session was running when the current interruption began.
    public var wasPlayingWhenInterrupted = false
    /// Whether a stream of the session is running (uncorked), as observed by the engine.
    public var isPlaying = false
    /// Since when `isPlaying` has had its current value (seconds, engine clock).
    public var playingChangedAt: Double = 0
    /// A8: the daemon muted the session's streams because it kept playing while interrupted.
    public var enforcedMute = false
    /// A4: the delayed request's order, to activate waiting sessions first come, first served.
    public var delayedSince: Double?
    /// An MPRIS player's side (Players.swift): set for the implicit session of a player, nil otherwise.
    public var player: PlayerControl?

    public init(id: AudioSessionID, descriptor: AudioSessionDescriptor) {
        self.id = id; self.descriptor = descriptor
    }

    /// Active or interrupted: the session holds an activation.
    public var holdsActivation: Bool { state == .active || state == .interrupted }
}

/// What the daemon applies to a session's streams: derived, never stored as a snapshot (A7).
public struct SessionOutput: Codable, Sendable, Equatable {
    /// Gain on top of the user's volume, dB (0 = none; the duck level while ducked).
    public var gainDb: Double
    /// Whether the streams are muted by the daemon (A8 enforcement or A12 ringer).
    public var muted: Bool
    /// Whether the session is ducked (A2, or by a call under A4).
    public var ducked: Bool { gainDb < 0 }

    public init(gainDb: Double = 0, muted: Bool = false) { self.gainDb = gainDb; self.muted = muted }
    public static let unity = SessionOutput()
}

/// The whole state of the audio arbiter.
///
/// Besides the sessions it keeps indexes, derived from them and kept in step by the policy's own
/// mutators (`put`, `modify`, `remove`): which sessions are live, active (by class), active
/// duckers and calls, delayed, timed (A8, A9), the holders in the order of their activations (by
/// class: who interrupts whom follows from it, A6), and which changed since the outputs were last
/// derived. Every rule looks only at the index it needs (and at the sessions its event names), so
/// an event costs in proportion to the sessions it can affect, not to the sessions registered,
/// nor to the ones active and untouched (issue 9). `sessions` and `applied` are therefore
/// read-only outside the policy.
///
/// A6 by the order of activations: a taker interrupts every holder of its class at its
/// activation (A1: the non-mixable holders; A4: every holder; A3: the spoken-audio holders), and
/// stays one of their interrupters until it releases its activation. So the interrupters of a
/// holder are the takers of its classes activated after it and holding still
/// (``interrupters(of:)``): a pile of n exclusive activations is a list of n, where keeping each
/// session's set was n²/2 entries (1 GB at 6,000) and its release as many removals.
public struct AudioPolicyState: Codable, Sendable, Equatable {
    /// Every registered session, by id.
    public internal(set) var sessions: [AudioSessionID: AudioSession] = [:]
    /// A12: the ringer switch.
    public var ringerSilent = false
    /// The outputs last handed to the engine, to emit only changes.
    public internal(set) var applied: [AudioSessionID: SessionOutput] = [:]
    /// Index: the sessions whose state is not `.inactive` (active, interrupted or delayed): the only
    /// ones that can interrupt, be interrupted, duck, be ducked, be enforced (A8) or expire (A9).
    public internal(set) var live: Set<AudioSessionID> = []
    /// Index: the active sessions with `duckOthers` (A2).
    var activeDuckers: Set<AudioSessionID> = []
    /// Index: the active calls (A4).
    var activeCallIDs: Set<AudioSessionID> = []
    /// Index: the active sessions (whom A4 interrupts at a call's activation).
    var activeSessions: Set<AudioSessionID> = []
    /// Index: the active non-mixable sessions (whom A1 interrupts at an activation).
    var activeExclusive: Set<AudioSessionID> = []
    /// Index: the active `spokenAudio` sessions (whom A3 interrupts at an activation).
    var activeSpoken: Set<AudioSessionID> = []
    /// Index: the sessions waiting for the call to end (A4).
    var delayed: Set<AudioSessionID> = []
    /// The next activation's order (``AudioSession/activationOrder``).
    public internal(set) var nextOrder = 0
    /// Index (A1, A6): the non-mixable holders by activation order. Each interrupts those before
    /// it (an exclusive activation, A1, or a call, A4).
    var exclusiveOrder = ActivationOrder()
    /// Index (A4, A6): every holder by activation order, whom the calls after it interrupt.
    var holderOrder = ActivationOrder()
    /// Index (A4, A6): the calls holding an activation, by activation order.
    var callOrder = ActivationOrder()
    /// Index (A3, A6): the spoken-audio holders by ``AudioSession/spokenOrder``, whom the
    /// sessions with `interruptSpokenAudioAndMixWithOthers` activated after it interrupt.
    var spokenOrder = ActivationOrder()
    /// Index (A3, A6): the holders with `interruptSpokenAudioAndMixWithOthers`, by activation order.
    var spokenTakerOrder = ActivationOrder()
    /// Index: each interrupter kept by name (``AudioSession/keptInterrupters``), with the sessions
    /// that keep it (A5, A6, A9).
    var keptInterrupting: [AudioSessionID: Set<AudioSessionID>] = [:]
    /// Index: the sessions with an A8 grace deadline (``AudioPolicy/a8GraceDeadline(_:config:)``).
    var a8Timed: Set<AudioSessionID> = []
    /// Index: the sessions with an A9 expiry deadline (``AudioPolicy/a9ExpiryDeadline(_:in:config:)``).
    var a9Timed: Set<AudioSessionID> = []
    /// The sessions put or removed since the outputs were last derived: with the ringer, the
    /// presence of a ducker and of a call, all an output depends on (``AudioPolicy/outputChanges(_:also:config:)``).
    var changedSinceOutputs: Set<AudioSessionID> = []
    /// The ringer value the outputs were last derived with: when it changes, every session's
    /// output is derived again (A12 mutes inactive ambient sessions too).
    var outputsRingerSilent = false
    /// Whether an active ducker (A2) existed when the outputs were last derived.
    var outputsHadDucker = false
    /// Whether an active call (A4) existed when the outputs were last derived.
    var outputsHadCall = false
    /// How many sessions' outputs the last event derived again (its cost in the walk that finds
    /// output changes; issue 9). Not part of equality.
    var outputsDerivedLastEvent = 0

    public init() {}

    enum CodingKeys: String, CodingKey { case sessions, ringerSilent, applied }

    /// Decodes the sessions, ringer and applied outputs, and rebuilds the indexes from them.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        ringerSilent = try c.decode(Bool.self, forKey: .ringerSilent)
        outputsRingerSilent = ringerSilent
        let decoded = try c.decode([AudioSessionID: AudioSession].self, forKey: .sessions)
        nextOrder = (decoded.values.compactMap { max($0.activationOrder ?? -1, $0.spokenOrder ?? -1) }.max() ?? -1) + 1
        for s in decoded.values.sorted(by: { ($0.activationOrder ?? -1, $0.id) < ($1.activationOrder ?? -1, $1.id) }) { put(s) }
        for id in sessions.keys { reindexA9(id) }  // who interrupts whom is known once all are in
        for (id, out) in try c.decode([AudioSessionID: SessionOutput].self, forKey: .applied) { setApplied(id, out) }
    }

    /// Encodes the sessions, ringer and applied outputs (the indexes are derived).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(sessions, forKey: .sessions)
        try c.encode(ringerSilent, forKey: .ringerSilent)
        try c.encode(applied, forKey: .applied)
    }

    /// Equal sessions, ringer and applied outputs (the indexes follow from them).
    public static func == (a: Self, b: Self) -> Bool {
        a.ringerSilent == b.ringerSilent && a.sessions == b.sessions && a.applied == b.applied
    }

    /// Active, non-interrupted calls (A4), by id.
    public var activeCalls: [AudioSession] {
        activeCallIDs.sorted().compactMap { sessions[$0] }
    }

    /// Whether `set` holds an id other than `id` (another ducker, another call).
    static func holdsOther(_ set: Set<AudioSessionID>, than id: AudioSessionID) -> Bool {
        set.count > (set.contains(id) ? 1 : 0)
    }

    /// Stores `s` under its id and keeps the indexes in step.
    mutating func put(_ s: AudioSession) {
        let old = sessions.updateValue(s, forKey: s.id)
        reindex(s.id, old: old, new: s)
    }

    /// Changes the session `id` in place (nothing if it is not registered), keeping the indexes in step.
    mutating func modify(_ id: AudioSessionID, _ change: (inout AudioSession) -> Void) {
        guard var s = sessions[id] else { return }
        change(&s)
        put(s)
    }

    /// Forgets the session `id` and its applied output.
    mutating func remove(_ id: AudioSessionID) {
        let old = sessions.removeValue(forKey: id)
        reindex(id, old: old, new: nil)
        applied[id] = nil
    }

    /// Records the output handed to the engine for `id`.
    mutating func setApplied(_ id: AudioSessionID, _ out: SessionOutput) {
        applied[id] = out
    }

    /// Takes the next activation order (A6).
    mutating func takeOrder() -> Int {
        defer { nextOrder += 1 }
        return nextOrder
    }

    /// A6: where a session's interrupters come from, class by class: the sessions it keeps by
    /// name, and the takers of each of its classes activated after it that hold still (A1: the
    /// exclusive holders after a non-mixable one; A4: the calls after any holder; A3: the
    /// spoken-audio takers after it became spoken audio). The one place the rule is read;
    /// ``interrupters(of:)``, ``isInterruptedByAnyone(_:)`` and ``interrupterSummary(of:first:)``
    /// take their answers from it. The parts may overlap (a non-mixable call is in `exclusive` and
    /// in `calls`). Costs a few binary searches, not the number of interrupters.
    struct InterrupterParts {
        var kept: Set<AudioSessionID> = []
        var exclusive: ArraySlice<AudioSessionID> = []
        var calls: ArraySlice<AudioSessionID> = []
        var spoken: ArraySlice<AudioSessionID> = []
        var isEmpty: Bool { kept.isEmpty && exclusive.isEmpty && calls.isEmpty && spoken.isEmpty }
    }

    /// A6: ``InterrupterParts`` of `s` (all empty for a session that holds no activation, but
    /// for those kept by name).
    func interrupterParts(of s: AudioSession) -> InterrupterParts {
        var parts = InterrupterParts(kept: s.keptInterrupters)
        guard s.holdsActivation, let order = s.activationOrder else { return parts }
        if !s.descriptor.isMixable { parts.exclusive = exclusiveOrder.later(than: order) }
        parts.calls = callOrder.later(than: order)
        if let spoken = s.spokenOrder { parts.spoken = spokenTakerOrder.later(than: spoken) }
        return parts
    }

    /// A6: every session interrupting `id` (``interrupterParts(of:)``). Costs the number of
    /// interrupters (for `status`).
    public func interrupters(of id: AudioSessionID) -> Set<AudioSessionID> {
        guard let s = sessions[id] else { return [] }
        let parts = interrupterParts(of: s)
        return parts.kept.union(parts.exclusive).union(parts.calls).union(parts.spoken)
    }

    /// A6 for a bounded listing (`status`): the first `limit` of ``interrupters(of:)`` by id, in
    /// order, and how many there are, without making the set: the session at the bottom of a pile
    /// has thousands. Each interrupter is counted in one part only (a non-mixable call is in
    /// `exclusive` and in `calls`; a call may also interrupt spoken audio or be kept by name), and
    /// the `exclusive` part, the pile, is taken as it is, without a look at each of its sessions.
    public func interrupterSummary(of id: AudioSessionID, first limit: Int) -> (first: [AudioSessionID], count: Int) {
        guard let s = sessions[id] else { return ([], 0) }
        let parts = interrupterParts(of: s)
        func isCall(_ x: AudioSessionID) -> Bool { sessions[x]?.descriptor.isCall == true }
        // The calls not in `exclusive` (there only when both are not mixable).
        let calls = parts.calls.filter { s.descriptor.isMixable || sessions[$0]?.descriptor.isMixable == true }
        let spoken = parts.spoken.filter { !isCall($0) }
        let laterCalls = Set(parts.calls)
        let kept = parts.kept.filter { !laterCalls.contains($0) }
        let all = parts.exclusive.lazy + calls + spoken + kept
        return (firstInOrder(limit, of: all, by: <), parts.exclusive.count + calls.count + spoken.count + kept.count)
    }

    /// A6: whether anyone interrupts `s` (``interrupterParts(of:)`` are not all empty).
    func isInterruptedByAnyone(_ s: AudioSession) -> Bool {
        !interrupterParts(of: s).isEmpty
    }

    /// A6, A9: whether `s` interrupts anyone: someone keeps it by name, or a holder of the class it
    /// interrupts was activated before it.
    func interruptsSomeone(_ s: AudioSession) -> Bool {
        if keptInterrupting[s.id] != nil { return true }
        guard s.holdsActivation, let order = s.activationOrder else { return false }
        if s.descriptor.isCall { return holderOrder.hasEarlier(than: order) }
        if !s.descriptor.isMixable, exclusiveOrder.hasEarlier(than: order) { return true }
        if s.descriptor.interruptsSpokenAudio, spokenOrder.hasEarlier(than: order) { return true }
        return false
    }

    /// Brings every index in step with the session `id`, now `new` (nil: removed), before `old`.
    private mutating func reindex(_ id: AudioSessionID, old: AudioSession?, new s: AudioSession?) {
        changedSinceOutputs.insert(id)
        func mark(_ set: inout Set<AudioSessionID>, _ member: Bool) {
            if member { set.insert(id) } else { set.remove(id) }
        }
        let active = s?.state == .active
        mark(&live, s.map { $0.state != .inactive } ?? false)
        mark(&activeSessions, active)
        mark(&activeDuckers, active && s!.descriptor.ducksOthers)
        mark(&activeCallIDs, active && s!.descriptor.isCall)
        mark(&activeExclusive, active && !s!.descriptor.isMixable)
        mark(&activeSpoken, active && s!.descriptor.mode == .spokenAudio)
        mark(&delayed, s?.state == .delayed)
        mark(&a8Timed, s.map { AudioPolicy.a8GraceStart($0) != nil } ?? false)
        // The orders: a holder's place in each list of its classes.
        func order(_ x: AudioSession?, _ member: (AudioSession) -> Bool) -> Int? {
            guard let x, x.holdsActivation, member(x) else { return nil }
            return x.activationOrder
        }
        var firstsLeft: [(takers: KeyPath<AudioPolicyState, ActivationOrder>, was: Int, now: Int?)] = []
        func place(_ list: WritableKeyPath<AudioPolicyState, ActivationOrder>, _ was: Int?, _ now: Int?,
                   takers: KeyPath<AudioPolicyState, ActivationOrder>? = nil) {
            guard was != now else { return }
            let first = self[keyPath: list].first
            if let was { self[keyPath: list].remove(was) }
            if let now { self[keyPath: list].insert(now, id) }
            // The first holder a class's takers interrupt left: the takers between it and the new
            // first may interrupt no one now (A9's index).
            if let takers, let was, was == first { firstsLeft.append((takers, was, self[keyPath: list].first)) }
        }
        place(\.exclusiveOrder, order(old) { !$0.descriptor.isMixable }, order(s) { !$0.descriptor.isMixable }, takers: \.exclusiveOrder)
        place(\.holderOrder, order(old) { _ in true }, order(s) { _ in true }, takers: \.callOrder)
        place(\.callOrder, order(old) { $0.descriptor.isCall }, order(s) { $0.descriptor.isCall })
        place(\.spokenTakerOrder, order(old) { $0.descriptor.interruptsSpokenAudio }, order(s) { $0.descriptor.interruptsSpokenAudio })
        let spokenWas = old.flatMap { $0.holdsActivation ? $0.spokenOrder : nil }
        let spokenNow = s.flatMap { $0.holdsActivation ? $0.spokenOrder : nil }
        place(\.spokenOrder, spokenWas, spokenNow, takers: \.spokenTakerOrder)
        for (takers, was, now) in firstsLeft {
            for x in self[keyPath: takers].between(was + 1, now.map { $0 + 1 } ?? .max) where x != id { reindexA9(x) }
        }
        let before = old?.keptInterrupters ?? [], after = s?.keptInterrupters ?? []
        if before != after {
            for x in before.subtracting(after) {
                keptInterrupting[x]?.remove(id)
                if keptInterrupting[x]?.isEmpty == true {
                    keptInterrupting[x] = nil
                    reindexA9(x)  // perhaps no longer an interrupter
                }
            }
            for x in after.subtracting(before) {
                let first = keptInterrupting[x] == nil
                keptInterrupting[x, default: []].insert(id)
                if first { reindexA9(x) }  // now an interrupter
            }
        }
        reindexA9(id)
    }

    /// Keeps `a9Timed` in step for `id`: an active transient holder with no running stream.
    private mutating func reindexA9(_ id: AudioSessionID) {
        if let s = sessions[id], AudioPolicy.a9ExpiryStart(s, in: self) != nil { a9Timed.insert(id) } else { a9Timed.remove(id) }
    }

    /// What differs between the indexes and the sessions they derive from (empty when in step),
    /// and where A6 does not hold (a session interrupted with no interrupter, or the reverse): for
    /// tests, after every event.
    func indexProblems() -> [String] {
        var problems: [String] = []
        func check<T: Equatable>(_ name: String, _ kept: T, _ derived: T) {
            if kept != derived { problems.append("\(name): kept \(kept), derived \(derived)") }
        }
        let all = Array(sessions.values)
        func ids(_ p: (AudioSession) -> Bool) -> Set<AudioSessionID> { Set(all.filter(p).map(\.id)) }
        check("live", live, ids { $0.state != .inactive })
        check("activeSessions", activeSessions, ids { $0.state == .active })
        check("activeDuckers", activeDuckers, ids { $0.state == .active && $0.descriptor.ducksOthers })
        check("activeCallIDs", activeCallIDs, ids { $0.state == .active && $0.descriptor.isCall })
        check("activeExclusive", activeExclusive, ids { $0.state == .active && !$0.descriptor.isMixable })
        check("activeSpoken", activeSpoken, ids { $0.state == .active && $0.descriptor.mode == .spokenAudio })
        check("delayed", delayed, ids { $0.state == .delayed })
        func orderOf(_ p: (AudioSession) -> Bool, _ key: (AudioSession) -> Int?) -> [Int] {
            all.filter { $0.holdsActivation && p($0) }.compactMap(key).sorted()
        }
        check("exclusiveOrder", exclusiveOrder.orders, orderOf({ !$0.descriptor.isMixable }, \.activationOrder))
        check("holderOrder", holderOrder.orders, orderOf({ _ in true }, \.activationOrder))
        check("callOrder", callOrder.orders, orderOf({ $0.descriptor.isCall }, \.activationOrder))
        check("spokenTakerOrder", spokenTakerOrder.orders, orderOf({ $0.descriptor.interruptsSpokenAudio }, \.activationOrder))
        check("spokenOrder", spokenOrder.orders, orderOf({ _ in true }, \.spokenOrder))
        for list in [exclusiveOrder, holderOrder, callOrder, spokenTakerOrder, spokenOrder] {
            for (order, id) in list.entries where sessions[id]?.activationOrder != order && sessions[id]?.spokenOrder != order {
                problems.append("order \(order) lists \(id), whose orders are \(String(describing: sessions[id]?.activationOrder))")
            }
        }
        var keptBy: [AudioSessionID: Set<AudioSessionID>] = [:]
        for s in all { for x in s.keptInterrupters { keptBy[x, default: []].insert(s.id) } }
        check("keptInterrupting", keptInterrupting, keptBy)
        check("a8Timed", a8Timed, ids { AudioPolicy.a8GraceStart($0) != nil })
        check("a9Timed", a9Timed, ids { AudioPolicy.a9ExpiryStart($0, in: self) != nil })
        for s in all {
            if s.holdsActivation != (s.activationOrder != nil) {
                problems.append("\(s.id) is \(s.state) with activation order \(String(describing: s.activationOrder))")
            }
            let all = interrupters(of: s.id)
            if (s.state == .interrupted) != isInterruptedByAnyone(s) || isInterruptedByAnyone(s) != !all.isEmpty {
                problems.append("A6: \(s.id) is \(s.state), interrupted by \(all.sorted())")
            }
            let summary = interrupterSummary(of: s.id, first: 3)
            if summary.count != all.count || summary.first != Array(all.sorted().prefix(3)) {
                problems.append("A6: \(s.id)'s summary \(summary) is not its interrupters \(all.sorted())")
            }
            if let o = s.activationOrder, o >= nextOrder { problems.append("\(s.id)'s order \(o) is not below \(nextOrder)") }
        }
        return problems
    }
}

/// The answer to an activation request.
public enum ActivationResult: Codable, Sendable, Equatable {
    /// Activated. `promptStyle` is set for `voicePrompt` sessions (A4); `ducked` if it starts ducked.
    case activated(promptStyle: PromptStyle?, ducked: Bool)
    /// A4: the session will be activated when the call ends.
    case delayed
    /// Refused, with a stable error code (the wire's error code of the same name).
    case failed(code: ActivationFailure)
}

/// Why an activation was refused; each is the wire's error code of the same name (PROTOCOL.md).
public enum ActivationFailure: String, Codable, Sendable, Equatable {
    /// No session with that id is registered.
    case notFound
    /// A call is active and the session did not accept a delayed activation (A4).
    case insufficientPriority
}

/// Something that happened, fed to the arbiter in order.
public enum AudioPolicyEvent: Sendable, Equatable {
    /// A session was registered (inactive). The engine chooses the id.
    case register(AudioSessionID, AudioSessionDescriptor)
    /// The app (or A10, for an implicit session) activates a session.
    case activate(AudioSessionID, acceptsDelay: Bool)
    /// The app deactivates a session; `notifyOthers` = `notifyOthersOnDeactivation`.
    case deactivate(AudioSessionID, notifyOthers: Bool)
    /// A session is forgotten (after deactivation, with the same notify semantics).
    case unregister(AudioSessionID, notifyOthers: Bool)
    /// A9: the owning client disconnected or crashed: its sessions deactivate, notifying others.
    case clientGone([AudioSessionID])
    /// Whether a stream of the session is running (uncorked).
    case playing(AudioSessionID, Bool)
    /// A12: the ringer switch.
    case ringer(silent: Bool)
    /// Time passed (A8 grace, A9 expiry).
    case tick
    /// An MPRIS player appeared on the bus: the engine chose its id and descriptor
    /// (``AudioPolicy/playerDescriptor(app:role:spokenAudio:)``); it is registered and activated (A10).
    /// `takingOver`: the implicit sessions of the streams it takes over (A10: one app, one
    /// session); they are unregistered, and the player takes the place of an interrupted one
    /// (``AudioPolicy/playerAppeared(_:_:_:_:takingOver:now:config:)``).
    case playerAppeared(AudioSessionID, AudioSessionDescriptor, PlayerFacts, takingOver: [AudioSessionID] = [])
    /// A player's properties changed (`PropertiesChanged`), or its streams' role changed its
    /// descriptor (nil: unchanged).
    case playerChanged(AudioSessionID, PlayerFacts, descriptor: AudioSessionDescriptor?)
    /// A player left the bus: its session is forgotten (notifying others, like a closed stream).
    case playerVanished(AudioSessionID)
}

/// What the engine must do or tell, in order.
public enum AudioPolicyEffect: Sendable, Equatable {
    /// Reply to an `activate` event.
    case activationResult(AudioSessionID, ActivationResult)
    /// Tell the session to pause.
    case interruptionBegan(AudioSessionID, reason: InterruptionReason)
    /// Tell the session its interruption ended; it may play again if `shouldResume` (A5).
    case interruptionEnded(AudioSessionID, shouldResume: Bool)
    /// A4: a delayed session was activated now that the call ended.
    case delayedActivationCompleted(AudioSessionID, promptStyle: PromptStyle?)
    /// A9: the daemon deactivated the session because it had no running stream for the expiry time.
    case expired(AudioSessionID)
    /// A8: the daemon muted (or unmuted) the session's streams; the session is told.
    case enforcementChanged(AudioSessionID, muted: Bool)
    /// Apply this output to the session's streams, ramped over `rampSeconds` (A2).
    case setOutput(AudioSessionID, SessionOutput, rampSeconds: Double)
    /// Call MPRIS `Pause` on the session's player (A4 for a call, A3 for a spoken-audio pause; `rule`
    /// says which).
    case pausePlayer(AudioSessionID, rule: String)
    /// Call MPRIS `Play` on the session's player (A5); `PlayPause` when it says it cannot `Play`.
    case resumePlayer(AudioSessionID, usePlayPause: Bool)
}

public enum AudioPolicy {
    /// Feeds one event to the arbiter. Pure: the result depends only on the arguments.
    /// - Parameters:
    ///   - now: seconds on the engine's monotonic clock.
    /// - Returns: the effects, in the order the engine must carry them out.
    public static func reduce(_ state: inout AudioPolicyState, _ event: AudioPolicyEvent, now: Double,
                              config: AudioPolicyConfig) -> [AudioPolicyEffect] {
        var fx: [AudioPolicyEffect] = []
        switch event {
        case let .register(id, descriptor):
            if state.sessions[id] == nil {
                var s = AudioSession(id: id, descriptor: descriptor)
                s.playingChangedAt = now
                state.put(s)  // changed, so its output is derived: A12 mutes a new ambient one under a silent ringer
            }
        case let .activate(id, acceptsDelay):
            fx += activate(&state, id, acceptsDelay: acceptsDelay, now: now, config: config)
        case let .deactivate(id, notify):
            fx += deactivate(&state, id, notifyOthers: notify, now: now, config: config)
        case let .unregister(id, notify):
            fx += deactivate(&state, id, notifyOthers: notify, now: now, config: config)
            state.remove(id)
        case let .clientGone(ids):
            fx += a9ClientGone(&state, ids, now: now, config: config)
        case let .playing(id, playing):
            if let s = state.sessions[id], s.isPlaying != playing {
                state.modify(id) {
                    $0.isPlaying = playing
                    $0.playingChangedAt = now
                }
            }
        case let .ringer(silent):
            state.ringerSilent = silent
        case .tick:
            break
        case let .playerAppeared(id, descriptor, facts, old):
            fx += playerAppeared(&state, id, descriptor, facts, takingOver: old, now: now, config: config)
        case let .playerChanged(id, facts, descriptor):
            fx += playerChanged(&state, id, facts, descriptor: descriptor, now: now, config: config)
        case let .playerVanished(id):
            fx += deactivate(&state, id, notifyOthers: true, now: now, config: config)
            state.remove(id)
        }
        fx = a4a3PausePlayers(&state, fx, now: now)  // before A8: a paused player is not muted
        let enforced = a8Enforce(&state, now: now, config: config)
        a8NotePlayerMutes(&state, enforced)
        fx += enforced
        fx += a9Expire(&state, now: now, config: config)
        fx = a5ResumePlayers(&state, fx)
        fx += outputChanges(&state, config: config)
        return fx
    }

    /// The next time a `.tick` is needed (A8 grace or A9 expiry), or nil when nothing is timed.
    /// Looks only at the sessions that have a deadline (`a8Timed`, `a9Timed`).
    public static func nextDeadline(_ state: AudioPolicyState, config: AudioPolicyConfig) -> Double? {
        var best: Double?
        func consider(_ t: Double) { best = min(best ?? t, t) }
        for id in state.a8Timed {
            if let s = state.sessions[id], let t = a8GraceDeadline(s, config: config) { consider(t) }
        }
        for id in state.a9Timed {
            if let s = state.sessions[id], let t = a9ExpiryDeadline(s, in: state, config: config) { consider(t) }
        }
        return best
    }

    // MARK: Activation (A1, A3, A4)

    static func activate(_ state: inout AudioPolicyState, _ id: AudioSessionID, acceptsDelay: Bool,
                         now: Double, config: AudioPolicyConfig) -> [AudioPolicyEffect] {
        guard let s = state.sessions[id] else { return [.activationResult(id, .failed(code: .notFound))] }
        if s.holdsActivation {
            // Idempotent: activating an active (or interrupted) session changes nothing.
            return [.activationResult(id, .activated(promptStyle: promptStyle(s, in: state),
                                                     ducked: output(of: s, in: state, config: config).ducked))]
        }
        var fx: [AudioPolicyEffect] = []
        if let refusal = a4RefuseDuringCall(&state, id, acceptsDelay: acceptsDelay, now: now) {
            return [.activationResult(id, refusal)]
        }
        fx += activateNow(&state, id, now: now)
        let s2 = state.sessions[id]!
        fx.append(.activationResult(id, .activated(promptStyle: promptStyle(s2, in: state),
                                                   ducked: output(of: s2, in: state, config: config).ducked)))
        return fx
    }

    /// Makes a session active and interrupts whom the rules say it interrupts.
    static func activateNow(_ state: inout AudioPolicyState, _ id: AudioSessionID, now: Double) -> [AudioPolicyEffect] {
        guard var s = state.sessions[id] else { return [] }
        s.state = .active
        s.delayedSince = nil
        s.playingChangedAt = s.isPlaying ? s.playingChangedAt : now
        // A6: its place in the order of activations, after every holder it interrupts.
        s.activationOrder = state.takeOrder()
        s.spokenOrder = s.descriptor.mode == .spokenAudio ? s.activationOrder : nil
        state.put(s)
        var fx: [AudioPolicyEffect] = []
        if s.descriptor.isCall {
            fx += a4CallInterruptsAll(&state, by: id, now: now)
        } else {
            fx += a1ExclusiveActivation(&state, by: id, now: now)
            fx += a3PauseSpokenAudio(&state, by: id, now: now)
        }
        return fx
    }

    /// A1: activating a non-mixable session interrupts every other active non-mixable session,
    /// reason `otherSession`. Mixable sessions keep playing.
    static func a1ExclusiveActivation(_ state: inout AudioPolicyState, by id: AudioSessionID, now: Double) -> [AudioPolicyEffect] {
        guard let taker = state.sessions[id], !taker.descriptor.isMixable else { return [] }
        // The interrupted ones stack (A6): the taker is after them in the order.
        let losers = state.activeExclusive.filter { $0 != id }.sorted()
        return losers.flatMap { interrupt(&state, $0, reason: .otherSession, now: now) }
    }

    /// A3: a session with `interruptSpokenAudioAndMixWithOthers` interrupts (does not duck) every
    /// active `spokenAudio` session, reason `otherSession`.
    static func a3PauseSpokenAudio(_ state: inout AudioPolicyState, by id: AudioSessionID, now: Double) -> [AudioPolicyEffect] {
        guard let taker = state.sessions[id], taker.descriptor.interruptsSpokenAudio else { return [] }
        let losers = state.activeSpoken.filter { $0 != id }.sorted()
        return losers.flatMap { interrupt(&state, $0, reason: .otherSession, now: now) }
    }

    /// A4: a call interrupts every other session holding an activation, mixable or not, reason `call`.
    static func a4CallInterruptsAll(_ state: inout AudioPolicyState, by id: AudioSessionID, now: Double) -> [AudioPolicyEffect] {
        let losers = state.activeSessions.filter { $0 != id }.sorted()
        return losers.flatMap { interrupt(&state, $0, reason: .call, now: now) }
    }

    /// A4: while a call is active, a non-mixable session cannot activate: `insufficientPriority`, or
    /// `delayed` when the request accepts delay. Mixable sessions may activate (ducked). Returns nil
    /// when the activation may proceed.
    static func a4RefuseDuringCall(_ state: inout AudioPolicyState, _ id: AudioSessionID, acceptsDelay: Bool,
                                   now: Double) -> ActivationResult? {
        guard let s = state.sessions[id], !s.descriptor.isCall, !s.descriptor.isMixable,
              !state.activeCallIDs.isEmpty else { return nil }
        guard acceptsDelay else { return .failed(code: .insufficientPriority) }
        state.modify(id) {
            $0.state = .delayed
            // Asked again while it waits: it keeps its place (first come, first served; it went
            // to the back, and was activated after one that asked later, a stranger's find).
            $0.delayedSince = $0.delayedSince ?? now
        }
        return .delayed
    }

    /// A4: `voicePrompt` sessions get a prompt style: `short` during a call, `normal` otherwise.
    static func promptStyle(_ s: AudioSession, in state: AudioPolicyState) -> PromptStyle? {
        guard s.descriptor.mode == .voicePrompt else { return nil }
        return AudioPolicyState.holdsOther(state.activeCallIDs, than: s.id) ? .short : .normal
    }

    /// A6: interruptions stack. The first interrupter of an active session interrupts it and sends
    /// `interruptionBegan`; an interrupted one is not named, as each later interrupter follows from
    /// the order of activations (``AudioPolicyState/interrupters(of:)``).
    static func interrupt(_ state: inout AudioPolicyState, _ id: AudioSessionID, reason: InterruptionReason,
                          now: Double) -> [AudioPolicyEffect] {
        guard var s = state.sessions[id], s.state == .active else { return [] }
        s.state = .interrupted
        s.interruptionReason = reason
        s.interruptedAt = now
        s.wasPlayingWhenInterrupted = s.isPlaying
        state.put(s)
        return [.interruptionBegan(id, reason: reason)]
    }

    // MARK: Deactivation (A1, A5, A6, A9)

    static func deactivate(_ state: inout AudioPolicyState, _ id: AudioSessionID, notifyOthers: Bool,
                           now: Double, config: AudioPolicyConfig) -> [AudioPolicyEffect] {
        guard var s = state.sessions[id], s.state != .inactive else { return [] }
        let released = s
        let wasHolding = s.holdsActivation
        let wasCall = s.descriptor.isCall && s.state == .active
        s.state = .inactive
        s.keptInterrupters = []
        s.interruptionReason = nil
        s.interruptedAt = nil
        s.delayedSince = nil
        s.enforcedMute = false
        s.activationOrder = nil
        s.spokenOrder = nil
        state.put(s)
        guard wasHolding else { return [] }
        // A4 before A5: the sessions waiting for the last call are activated first, while what the
        // call interrupted is still interrupted; a waiting session that would interrupt one of
        // those (A1, A3) then holds it, and A5 resumes only the others. Resumed first, such a
        // session was told `interruptionEnded` and `interruptionBegan` in the same instant (a
        // music player told to play and to pause at once; both strangers of the eleventh session).
        // The last call: no call holds an activation any more. A call on hold (interrupted by the
        // one ending) is not over: A5 resumes it, and the waiting sessions keep waiting (taken
        // for over, the waiting session held the audio over a call on hold: a stranger's find).
        var fx: [AudioPolicyEffect] = []
        if wasCall && state.callOrder.isEmpty {
            fx += a4ActivateDelayed(&state, now: now)
        }
        // Calls always notify others (A5).
        fx += a5ReleaseInterruptions(&state, released: released, notifyOthers: notifyOthers || s.descriptor.isCall, now: now)
        return fx
    }

    /// A5/A6: the deactivating session stops interrupting others. A session whose last interrupter
    /// ends gets `interruptionEnded`, with `shouldResume` only if that interrupter notified others and
    /// the session was playing when interrupted. A1: without notification the loss is permanent —
    /// no event, and the session is inactive; and what it interrupted itself is released as by a
    /// deactivation without notification (it will never notify them: they lose theirs for good
    /// too, unless another interrupter holds them).
    ///
    /// `released` is the session as it was before it released its activation (its place in the
    /// order). Only the sessions it was the last interrupter of by its class can resume: those
    /// activated after the latest taker of that class that holds still (none when it was not the
    /// latest), and those that kept it by name; each is checked for other interrupters.
    static func a5ReleaseInterruptions(_ state: inout AudioPolicyState, released: AudioSession, notifyOthers: Bool,
                                       now: Double) -> [AudioPolicyEffect] {
        var fx: [AudioPolicyEffect] = []
        // The released sessions, in turn: this one, then those that lost theirs for good by it.
        var queue = [released][...]
        while let gone = queue.popFirst() {
            let id = gone.id
            var candidates = state.keptInterrupting[id] ?? []
            for other in candidates { state.modify(other) { $0.keptInterrupters.remove(id) } }
            if let order = gone.activationOrder {
                func lastTaken(_ victims: ActivationOrder, after takers: ActivationOrder) {
                    let latest = takers.last ?? .min
                    if latest < order { candidates.formUnion(victims.between(latest, order)) }
                }
                if gone.descriptor.isCall { lastTaken(state.holderOrder, after: state.callOrder) }
                if !gone.descriptor.isMixable { lastTaken(state.exclusiveOrder, after: state.exclusiveOrder) }
                if gone.descriptor.interruptsSpokenAudio { lastTaken(state.spokenOrder, after: state.spokenTakerOrder) }
            }
            for otherID in candidates.sorted() {
                guard var o = state.sessions[otherID], o.state == .interrupted, !state.isInterruptedByAnyone(o) else { continue }
                let before = o
                let wasMuted = o.enforcedMute
                o.interruptionReason = nil
                o.interruptedAt = nil
                o.enforcedMute = false
                if notifyOthers {
                    o.state = .active
                    // A9's clock starts again, as at an activation: the app was told to pause, and
                    // is given the whole expiry time to play again (it was expired in the same
                    // millisecond as its `interruptionEnded` after a call of 10 s, a stranger's find).
                    if !o.isPlaying { o.playingChangedAt = now }
                    fx.append(.interruptionEnded(otherID, shouldResume: o.wasPlayingWhenInterrupted))
                } else {
                    o.state = .inactive
                    o.activationOrder = nil
                    o.spokenOrder = nil
                    queue.append(before)
                }
                if wasMuted { fx.append(.enforcementChanged(otherID, muted: false)) }
                state.put(o)
            }
        }
        return fx
    }

    /// A4: when the last call ends, sessions that accepted delay are activated, first come first served.
    static func a4ActivateDelayed(_ state: inout AudioPolicyState, now: Double) -> [AudioPolicyEffect] {
        let waiting = state.delayed.compactMap { state.sessions[$0] }
            .sorted { ($0.delayedSince ?? 0, $0.id) < ($1.delayedSince ?? 0, $1.id) }
        var fx: [AudioPolicyEffect] = []
        for w in waiting {
            fx += activateNow(&state, w.id, now: now)
            fx.append(.delayedActivationCompleted(w.id, promptStyle: promptStyle(state.sessions[w.id]!, in: state)))
        }
        return fx
    }

    /// A9: a client that disconnects or crashes deactivates its sessions notifying others, releasing
    /// its ducks and interruptions at once.
    static func a9ClientGone(_ state: inout AudioPolicyState, _ ids: [AudioSessionID], now: Double,
                             config: AudioPolicyConfig) -> [AudioPolicyEffect] {
        var fx: [AudioPolicyEffect] = []
        // Its sessions waiting for a call first (they hold nothing): else the end of its own call
        // activated them (A4) on their way out, and they interrupted others for an instant (a
        // stranger's find: another app got interruptionEnded, interruptionBegan, interruptionEnded).
        let waiting = ids.filter { state.delayed.contains($0) }
        for id in waiting.sorted() + ids.filter({ !waiting.contains($0) }).sorted() {
            fx += deactivate(&state, id, notifyOthers: true, now: now, config: config)
            state.remove(id)
        }
        return fx
    }

    // MARK: Timed rules (A8, A9)

    /// A8: when the grace period of an interrupted session that keeps playing starts, and whether
    /// the grace applies (a player that cannot pause is muted at once); nil: no grace period runs.
    /// Independent of the config, so that the state can index the sessions that have one (`a8Timed`).
    static func a8GraceStart(_ s: AudioSession) -> (at: Double, withGrace: Bool)? {
        if let player = a8PlayerGraceStart(s) { return player.map { ($0, false) } }
        guard s.state == .interrupted, s.isPlaying, !s.enforcedMute, let at = s.interruptedAt else { return nil }
        return (max(at, s.playingChangedAt), true)
    }

    /// A8: when an interrupted session that keeps playing is muted; nil when it is not.
    static func a8GraceDeadline(_ s: AudioSession, config: AudioPolicyConfig) -> Double? {
        guard let start = a8GraceStart(s) else { return nil }
        return start.withGrace ? start.at + config.enforcementGrace : start.at
    }

    /// A8: an interrupted session whose streams keep playing past the grace period is muted; it is
    /// unmuted at `interruptionEnded` (``a5ReleaseInterruptions``). The session is told either way.
    static func a8Enforce(_ state: inout AudioPolicyState, now: Double, config: AudioPolicyConfig) -> [AudioPolicyEffect] {
        var fx: [AudioPolicyEffect] = []
        // Found among the sessions with a grace period (`a8Timed`); only the due ones are sorted.
        let due = state.a8Timed.filter { id in
            guard let s = state.sessions[id], let deadline = a8GraceDeadline(s, config: config) else { return false }
            return now >= deadline
        }
        for id in due.sorted() {
            state.modify(id) { $0.enforcedMute = true }
            fx.append(.enforcementChanged(id, muted: true))
        }
        return fx
    }

    /// Whether a session's activation affects others: it ducks, is a call, or interrupts someone
    /// (``AudioPolicyState/interruptsSomeone(_:)``).
    static func isTransientHolder(_ s: AudioSession, in state: AudioPolicyState) -> Bool {
        s.descriptor.ducksOthers || s.descriptor.isCall || state.interruptsSomeone(s)
    }

    /// A9: since when an active transient holder has had no running stream; nil when it cannot
    /// expire. Independent of the config, so that the state can index them (`a9Timed`).
    static func a9ExpiryStart(_ s: AudioSession, in state: AudioPolicyState) -> Double? {
        guard s.state == .active, !s.isPlaying, isTransientHolder(s, in: state) else { return nil }
        return s.playingChangedAt
    }

    /// A9: when an active transient holder with no running stream expires (`transientExpiry`
    /// seconds after its streams stopped); nil when it does not.
    static func a9ExpiryDeadline(_ s: AudioSession, in state: AudioPolicyState, config: AudioPolicyConfig) -> Double? {
        a9ExpiryStart(s, in: state).map { $0 + config.transientExpiry }
    }

    /// A9: a ducking or interrupting session with no running stream for the expiry time is
    /// deactivated by the daemon (notifying others) and told `expired`.
    static func a9Expire(_ state: inout AudioPolicyState, now: Double, config: AudioPolicyConfig) -> [AudioPolicyEffect] {
        var fx: [AudioPolicyEffect] = []
        // In id order, each checked against the state left by the expiries before it (an expiry
        // resumes whom it interrupted, and may end another's part as an interrupter). The due ones
        // are found among the sessions that can expire (`a9Timed`) and only they are sorted, again
        // after each expiry among the ids after it.
        func due(after last: AudioSessionID?) -> [AudioSessionID] {
            state.a9Timed.filter { id in
                if let last, !(last < id) { return false }
                guard let s = state.sessions[id], let deadline = a9ExpiryDeadline(s, in: state, config: config) else { return false }
                return now >= deadline
            }.sorted()
        }
        var next = due(after: nil)[...]
        while let id = next.popFirst() {
            fx.append(.expired(id))
            fx += deactivate(&state, id, notifyOthers: true, now: now, config: config)
            next = due(after: id)[...]
        }
        return fx
    }

    // MARK: Derived outputs (A2, A4, A7, A8, A12)

    /// The output a session's streams should have now. A2: an active session is ducked while any
    /// other active ducker exists, unless it ducks others itself (two prompts mix at full level);
    /// A4: mixable sessions are ducked during a call (calls are never ducked); an interrupted
    /// session keeps the gain it had (A6: it comes back at the level the rules give when it resumes). A8/A12: muted when enforced or
    /// when the ringer is silent and the category is silenced by it.
    /// The other sessions it depends on are read from the state's indexes of active duckers (A2)
    /// and active calls (A4).
    public static func output(of s: AudioSession, in state: AudioPolicyState, config: AudioPolicyConfig) -> SessionOutput {
        var out = SessionOutput()
        out.muted = s.enforcedMute || (state.ringerSilent && s.descriptor.category.silencedByRinger)
        // An interrupted session is paused: its gain stays where it was (no duck news for a
        // paused app; a non-obeying one does not get louder during the A8 grace period).
        if s.state == .interrupted {
            out.gainDb = state.applied[s.id]?.gainDb ?? 0
            return out
        }
        guard s.state == .active, !s.descriptor.isCall else { return out }
        let duckedByPrompt = !s.descriptor.ducksOthers && AudioPolicyState.holdsOther(state.activeDuckers, than: s.id)
        let duckedByCall = AudioPolicyState.holdsOther(state.activeCallIDs, than: s.id)
        if duckedByPrompt || duckedByCall { out.gainDb = config.duckLevelDb }
        return out
    }

    /// Compares the derived output of every session that can have changed with what was last
    /// applied and emits the changes, ramped down or up per A2.
    ///
    /// A session's output depends on the session itself, its applied gain (while interrupted), the
    /// ringer (A12), and whether another active ducker (A2) or call (A4) exists. For a session the
    /// event did not change, "another" is "any": a session that became or stopped being a ducker
    /// or a call changed. So the sessions that can have changed are the ones the event changed
    /// (`changedSinceOutputs`: every session put or removed, a new one included, A12 muting a new
    /// ambient one under a silent ringer); the `live` ones too when the presence of a ducker or of
    /// a call flipped; and every session when the ringer changed. An event that changes one
    /// session with 1,000 others active derives one output, not 1,001.
    static func outputChanges(_ state: inout AudioPolicyState, config: AudioPolicyConfig) -> [AudioPolicyEffect] {
        var candidates = state.changedSinceOutputs
        let hasDucker = !state.activeDuckers.isEmpty, hasCall = !state.activeCallIDs.isEmpty
        if state.outputsRingerSilent != state.ringerSilent {
            candidates = Set(state.sessions.keys)
        } else if state.outputsHadDucker != hasDucker || state.outputsHadCall != hasCall {
            candidates.formUnion(state.live)  // an inactive session's output depends on neither
        }
        state.outputsRingerSilent = state.ringerSilent
        state.outputsHadDucker = hasDucker
        state.outputsHadCall = hasCall
        state.changedSinceOutputs = []
        // The changed ones are found first, and only they are sorted.
        var changed: [(id: AudioSessionID, new: SessionOutput, old: SessionOutput)] = []
        state.outputsDerivedLastEvent = candidates.count
        for id in candidates {
            guard let s = state.sessions[id] else { continue }
            let new = output(of: s, in: state, config: config)
            let old = state.applied[id] ?? .unity
            if new != old { changed.append((id, new, old)) }
        }
        var fx: [AudioPolicyEffect] = []
        for (id, new, old) in changed.sorted(by: { $0.id < $1.id }) {
            let ramp = new.gainDb < old.gainDb ? config.duckRampDown : (new.gainDb > old.gainDb ? config.duckRampUp : 0)
            state.setApplied(id, new)  // changes `applied` only: the session's output inputs stay
            fx.append(.setOutput(id, new, rampSeconds: ramp))
        }
        return fx
    }
}
