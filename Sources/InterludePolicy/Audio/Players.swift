/// MPRIS media players as implicit audio sessions (issue 10; POLICY.md A3, A4, A5, A8, A10).
///
/// A player (`org.mpris.MediaPlayer2.*` on the session bus) is an app that never registers a
/// session. The engine makes it one implicit session that owns the player's streams too (matched by
/// pid), so one app is one session. The policy treats it like any implicit session (A1–A12), with
/// three steps of its own, each a function named after its rule:
/// - ``AudioPolicy/a4a3PausePlayers(_:_:now:)``: an interruption (a call, A4; a spoken-audio
///   pause, A3) of a `Playing` player that can pause becomes a `Pause` call instead of a mute.
/// - ``AudioPolicy/a8PlayerGraceStart(_:)``: A8 muting stays the fallback: at once for a
///   player that cannot pause, after the grace period for one that does not obey `Pause`.
/// - ``AudioPolicy/a5ResumePlayers(_:_:)``: at `interruptionEnded` with `shouldResume`, `Play`
///   goes only to a player Interlude itself paused, that is still paused and that the user did not
///   touch meanwhile.

/// MPRIS `PlaybackStatus`.
public enum PlaybackStatus: String, Codable, Sendable, Equatable {
    case playing = "Playing", paused = "Paused", stopped = "Stopped"
}

/// What a player reports on the bus (MPRIS `org.mpris.MediaPlayer2.Player` properties).
public struct PlayerFacts: Codable, Sendable, Equatable {
    /// `PlaybackStatus`.
    public var status: PlaybackStatus
    /// `CanPause`: whether `Pause` is expected to work.
    public var canPause: Bool
    /// `CanPlay`: whether `Play` is expected to work.
    public var canPlay: Bool
    /// `CanControl`: false means the player accepts no control at all (all `Can*` are false then).
    public var canControl: Bool

    public init(status: PlaybackStatus, canPause: Bool = true, canPlay: Bool = true, canControl: Bool = true) {
        self.status = status; self.canPause = canPause; self.canPlay = canPlay; self.canControl = canControl
    }

    /// Whether Interlude may pause it (A4, A3): it can be controlled and says it can pause.
    public var pausable: Bool { canControl && canPause }
}

/// What Interlude last did to a player, with the rule that decided it (shown by `status`).
public enum PlayerAction: String, Codable, Sendable, Equatable {
    /// Nothing yet.
    case none
    /// Sent `Pause` for a call (A4) or a spoken-audio pause (A3).
    case paused
    /// Muted its streams: it cannot pause, or did not obey `Pause` within the grace period (A8).
    case muted
    /// Sent `Play` after the interruption ended (A5).
    case resumed
    /// Interrupted while not playing (the user had paused it): not paused, and not resumed (A5).
    case leftAlonePausedBefore
    /// The user resumed, paused or stopped it during the interruption: not touched again (A5).
    case leftAloneUserTouched
    /// Interlude paused it but the interruption ended without `shouldResume` (or the player was no
    /// longer paused, or cannot play): not resumed (A5).
    case leftAloneNoResume
}

/// The player side of an implicit session: its facts and what Interlude did in the current
/// interruption.
public struct PlayerControl: Codable, Sendable, Equatable {
    /// The player's last reported facts.
    public var facts: PlayerFacts
    /// Interlude sent `Pause` in the current interruption (A4, A3).
    public var pausedByInterlude = false
    /// The player reported `Paused` after that `Pause` (it obeyed).
    public var pauseObeyed = false
    /// The user changed the playback state during the current interruption (A5: left alone).
    public var userTouched = false
    /// What Interlude last did to it, and the rule (for `status` and the log).
    public var lastAction: PlayerAction = .none
    /// The rule id of `lastAction` ("A4", "A3", "A5", "A8").
    public var lastRule: String?

    public init(facts: PlayerFacts) { self.facts = facts }
}

extension AudioPolicy {
    /// A10 for players: the implicit session of a player whose streams carry `role` (nil: no stream
    /// yet). Always `playback` with `mixWithOthers`: a player starting or stopping never interrupts
    /// another session (it is an unmodified app, A1 does not take audio from others on its behalf),
    /// but calls (A4) interrupt it and prompts duck it (A2). `spokenAudio` (podcast and audiobook
    /// apps listed in `audio.spokenAudioPlayers`) makes prompts that interrupt spoken audio pause
    /// it (A3); a `video` role gives `moviePlayback`.
    public static func playerDescriptor(app: String, role: String?, spokenAudio: Bool) -> AudioSessionDescriptor {
        let mode: AudioMode = spokenAudio ? .spokenAudio : (role == "video" ? .moviePlayback : .default)
        return AudioSessionDescriptor(app: app, category: .playback, mode: mode, options: [.mixWithOthers], implicit: true)
    }

    /// A player appeared: registered as an implicit session and activated (A10). The implicit
    /// sessions of the streams it takes over (`old`) are unregistered first (one app, one
    /// session). When one of them was interrupted (A4, A1, A3), the player takes its place in the
    /// order of activations (A6) and its interruption, so what interrupted the stream interrupts
    /// the player, which is paused (A4) instead of activated anew during a call and ducked under
    /// it: a daemon started again during a call found mpv's stream first (interrupted by the call
    /// stream), then mpv on the bus, and mpv played on at −14 dB under the call (a stranger's find).
    static func playerAppeared(_ state: inout AudioPolicyState, _ id: AudioSessionID, _ d: AudioSessionDescriptor,
                               _ facts: PlayerFacts, takingOver old: [AudioSessionID] = [], now: Double,
                               config: AudioPolicyConfig) -> [AudioPolicyEffect] {
        guard state.sessions[id] == nil else { return playerChanged(&state, id, facts, descriptor: d, now: now, config: config) }
        let place = old.compactMap { state.sessions[$0] }.filter { $0.state == .interrupted && $0.activationOrder != nil }
            .min { $0.activationOrder! < $1.activationOrder! }
        var fx: [AudioPolicyEffect] = []
        for o in old where state.sessions[o] != nil {
            fx += deactivate(&state, o, notifyOthers: true, now: now, config: config)
            state.remove(o)
        }
        var s = AudioSession(id: id, descriptor: d)
        s.player = PlayerControl(facts: facts)
        s.isPlaying = facts.status == .playing
        s.playingChangedAt = now
        if let place, let order = place.activationOrder {
            var taking = s
            taking.state = .interrupted
            taking.activationOrder = order
            taking.spokenOrder = d.mode == .spokenAudio ? (place.spokenOrder ?? order) : nil
            taking.interruptionReason = place.interruptionReason
            taking.interruptedAt = place.interruptedAt
            taking.wasPlayingWhenInterrupted = s.isPlaying
            state.put(taking)
            // Still interrupted by someone (the call holds on): told so, and A4 pauses it.
            if state.isInterruptedByAnyone(taking) {
                return fx + [.interruptionBegan(id, reason: place.interruptionReason ?? .call)]
            }
            state.remove(id)
        }
        state.put(s)
        return fx + activate(&state, id, acceptsDelay: false, now: now, config: config)
    }

    /// A player's facts (or the role of its streams, hence its descriptor) changed. During an
    /// interruption, `Paused` after Interlude's `Pause` is the player obeying; any other change of
    /// `PlaybackStatus` is the user's (A5: Interlude leaves the player alone from then on).
    static func playerChanged(_ state: inout AudioPolicyState, _ id: AudioSessionID, _ facts: PlayerFacts,
                              descriptor: AudioSessionDescriptor?, now: Double, config: AudioPolicyConfig) -> [AudioPolicyEffect] {
        guard let s = state.sessions[id], var p = s.player else { return [] }
        let old = p.facts.status
        p.facts = facts
        if s.state == .interrupted, facts.status != old {
            if p.pausedByInterlude, !p.pauseObeyed, facts.status == .paused {
                p.pauseObeyed = true
            } else if !p.userTouched {
                p.userTouched = true
                p.lastAction = .leftAloneUserTouched
                p.lastRule = "A5"
            }
        }
        let playing = facts.status == .playing
        // A3, A6: a holder that stops being spoken audio keeps its A3 interrupters by name (they
        // no longer follow from the order); one that becomes spoken audio counts from now.
        var kept = s.keptInterrupters, spokenOrder = s.spokenOrder
        if let descriptor, s.holdsActivation, (descriptor.mode == .spokenAudio) != (s.descriptor.mode == .spokenAudio) {
            if let from = s.spokenOrder {
                kept.formUnion(state.spokenTakerOrder.later(than: from))
                spokenOrder = nil
            } else {
                spokenOrder = state.takeOrder()
            }
        }
        state.modify(id) {
            $0.player = p
            if let descriptor { $0.descriptor = descriptor }
            $0.keptInterrupters = kept
            $0.spokenOrder = spokenOrder
            if $0.isPlaying != playing { $0.isPlaying = playing; $0.playingChangedAt = now }
        }
        // A player that lost its activation for good (A1 without notification) takes it again
        // when it plays, as a stream's implicit session does when its stream comes back.
        if playing, state.sessions[id]?.state == .inactive {
            return activate(&state, id, acceptsDelay: false, now: now, config: config)
        }
        return []
    }

    /// A8 for players: when an interrupted player is muted (no grace period added), or nil to use
    /// the general rule (``a8GraceStart(_:)``) unchanged. A player the user touched during the
    /// interruption is left alone (no mute, A5); one that cannot pause has nobody to obey the
    /// interruption, so its streams are muted at once; one told to `Pause` gets the grace period.
    /// Returns `.some(nil)` for "no deadline".
    static func a8PlayerGraceStart(_ s: AudioSession) -> Double?? {
        guard let p = s.player else { return .none }
        if p.userTouched { return .some(nil) }
        if !p.facts.pausable, s.state == .interrupted, s.isPlaying, !s.enforcedMute, let at = s.interruptedAt {
            return .some(at)
        }
        return .none
    }

    /// A4/A3 for players: right after each `interruptionBegan` of a player that is `Playing` and
    /// can pause, a `pausePlayer` effect (instead of waiting to mute it, A8). A player that was not
    /// playing (paused by its user) is left alone and will not be resumed (A5).
    static func a4a3PausePlayers(_ state: inout AudioPolicyState, _ fx: [AudioPolicyEffect], now: Double) -> [AudioPolicyEffect] {
        guard fx.contains(where: { if case .interruptionBegan = $0 { return true } else { return false } }) else { return fx }
        var out: [AudioPolicyEffect] = []
        for e in fx {
            out.append(e)
            guard case let .interruptionBegan(id, reason) = e, let s = state.sessions[id], var p = s.player else { continue }
            let rule = reason == .call ? "A4" : "A3"
            p.pausedByInterlude = false
            p.pauseObeyed = false
            p.userTouched = false
            if p.facts.status != .playing {
                p.lastAction = .leftAlonePausedBefore
                p.lastRule = "A5"
            } else if p.facts.pausable {
                p.pausedByInterlude = true
                p.lastAction = .paused
                p.lastRule = rule
                out.append(.pausePlayer(id, rule: rule))
            }
            // A playing player that cannot pause: A8 mutes it (``a8PlayerGraceStart``).
            state.modify(id) { $0.player = p }
        }
        return out
    }

    /// A8 for players: records the mute in the player's `lastAction`.
    static func a8NotePlayerMutes(_ state: inout AudioPolicyState, _ fx: [AudioPolicyEffect]) {
        for e in fx {
            guard case let .enforcementChanged(id, true) = e, state.sessions[id]?.player != nil else { continue }
            state.modify(id) { $0.player?.lastAction = .muted; $0.player?.lastRule = "A8" }
        }
    }

    /// A5 when the daemon stops: every player Interlude paused in an interruption that has not
    /// ended yet (a call still going on when the daemon stops, a connection's session released
    /// too late to be told) gets `resumePlayer` now, on the same conditions as at
    /// `interruptionEnded` with `shouldResume`: still `Paused`, untouched by its user, and
    /// controllable. No pause of Interlude's outlives the daemon, as no duck or mute does (A7);
    /// a daemon started again pauses it again if the call still holds the audio. Sessions are
    /// taken in id order; each one resumed is marked `resumed` (A5).
    public static func a5ResumePlayersAtStop(_ state: inout AudioPolicyState) -> [AudioPolicyEffect] {
        var out: [AudioPolicyEffect] = []
        for id in state.sessions.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            guard var p = state.sessions[id]?.player, p.pausedByInterlude, !p.userTouched,
                  p.facts.status == .paused, p.facts.canControl else { continue }
            p.lastAction = .resumed
            p.lastRule = "A5"
            p.pausedByInterlude = false
            p.pauseObeyed = false
            state.modify(id) { $0.player = p }
            out.append(.resumePlayer(id, usePlayPause: !p.facts.canPlay))
        }
        return out
    }

    /// A5 for players: right after each `interruptionEnded` of a player, `resumePlayer` only if
    /// `shouldResume`, Interlude paused it in this interruption, it is still `Paused`, the user did
    /// not touch it meanwhile, and it can be controlled. Otherwise it is left alone.
    static func a5ResumePlayers(_ state: inout AudioPolicyState, _ fx: [AudioPolicyEffect]) -> [AudioPolicyEffect] {
        guard fx.contains(where: { if case .interruptionEnded = $0 { return true } else { return false } }) else { return fx }
        var out: [AudioPolicyEffect] = []
        for e in fx {
            out.append(e)
            guard case let .interruptionEnded(id, shouldResume) = e, let s = state.sessions[id], var p = s.player else { continue }
            if p.userTouched {
                p.lastAction = .leftAloneUserTouched
            } else if p.pausedByInterlude, shouldResume, p.facts.status == .paused, p.facts.canControl {
                // Also when A8 muted it first: it obeyed Pause only after the grace period.
                p.lastAction = .resumed
                out.append(.resumePlayer(id, usePlayPause: !p.facts.canPlay))
            } else if p.lastAction == .muted {
                // A8 muted it (it cannot pause, or ignored Pause): unmuted now, not resumed.
            } else if p.pausedByInterlude {
                p.lastAction = .leftAloneNoResume
            } else if p.lastAction != .muted {
                p.lastAction = .leftAlonePausedBefore
            }
            if p.lastAction != .muted { p.lastRule = "A5" }
            p.pausedByInterlude = false
            p.pauseObeyed = false
            p.userTouched = false
            state.modify(id) { $0.player = p }
        }
        return out
    }
}
