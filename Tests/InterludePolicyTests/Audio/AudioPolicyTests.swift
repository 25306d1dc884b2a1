import Testing
@testable import InterludePolicy

/// One suite per rule of POLICY.md part A; each test names the rule it proves.
@Suite struct AudioPolicyRuleTests {

    // MARK: A1 Exclusive activation

    @Test func A1_nonMixableActivationInterruptsOtherNonMixable() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        let fx = h.activate("radio")  // not registered yet
        #expect(fx == [.activationResult(id("radio"), .failed(code: .notFound))])
        h.register("radio", AudioHarness.music2)
        let fx2 = h.activate("radio")
        #expect(fx2.contains(.interruptionBegan(id("music"), reason: .otherSession)))
        #expect(h.stateOf("music") == .interrupted)
        #expect(h.stateOf("radio") == .active)
    }

    @Test(arguments: [
        ("ambient", AudioHarness.game), ("prompt", AudioHarness.nav), ("assistant", AudioHarness.assistant),
    ])
    func A1_mixableSessionsKeepPlaying(name: String, mixable: AudioSessionDescriptor) {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start(name, mixable)
        #expect(h.stateOf("music") == .active)
        // And a mixable session is not interrupted by a later non-mixable one.
        h.start("radio", AudioHarness.music2)
        #expect(h.stateOf(name) == .active)
        #expect(h.stateOf("music") == .interrupted)
    }

    @Test func A1_lossIsPermanentWithoutNotification() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("radio", AudioHarness.music2)
        let fx = h.deactivate("radio", notify: false)
        #expect(!fx.contains { if case .interruptionEnded = $0 { return true } else { return false } })
        #expect(h.stateOf("music") == .inactive)
    }

    @Test func A1_lossEndsWithNotification() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("radio", AudioHarness.music2)
        let fx = h.deactivate("radio", notify: true)
        #expect(fx.contains(.interruptionEnded(id("music"), shouldResume: true)))
        #expect(h.stateOf("music") == .active)
    }

    // MARK: A2 Ducking

    @Test func A2_duckerLowersOthersWithRampDownThenUp() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        let fx = h.activate("nav")  // not registered
        #expect(fx.count == 1)
        h.register("nav", AudioHarness.nav)
        let down = h.activate("nav")
        #expect(down.contains(.setOutput(id("music"), SessionOutput(gainDb: -14), rampSeconds: 0.3)))
        #expect(h.output("nav") == .unity)
        let up = h.deactivate("nav")
        #expect(up.contains(.setOutput(id("music"), SessionOutput(gainDb: 0), rampSeconds: 0.5)))
    }

    @Test func A2_duckLevelAndRampsComeFromConfig() {
        var h = AudioHarness()
        h.config = AudioPolicyConfig(duckLevelDb: -20, duckRampDown: 0.1, duckRampUp: 0.2)
        h.start("music", AudioHarness.music)
        h.register("nav", AudioHarness.nav)
        #expect(h.activate("nav").contains(.setOutput(id("music"), SessionOutput(gainDb: -20), rampSeconds: 0.1)))
        #expect(h.deactivate("nav").contains(.setOutput(id("music"), SessionOutput(gainDb: 0), rampSeconds: 0.2)))
    }

    @Test func A2_twoPromptsMixAtFullLevel() {
        var h = AudioHarness()
        h.start("nav", AudioHarness.nav)
        h.start("assistant", AudioHarness.assistant)
        #expect(h.output("nav") == .unity)
        #expect(h.output("assistant") == .unity)
    }

    @Test func A2_duckEndsWithTheLastDuckerNotTheFirst() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("nav", AudioHarness.nav)
        h.start("assistant", AudioHarness.assistant)
        #expect(h.applied("music").gainDb == -14)
        let first = h.deactivate("nav")
        #expect(!first.contains { if case .setOutput(id("music"), _, _) = $0 { return true } else { return false } })
        #expect(h.applied("music").gainDb == -14)
        h.deactivate("assistant")
        #expect(h.applied("music").gainDb == 0)
    }

    // MARK: A3 Spoken audio pauses

    @Test func A3_promptInterruptsSpokenAudioInsteadOfDucking() {
        var h = AudioHarness()
        h.start("podcast", AudioHarness.podcast)
        h.start("music", AudioHarness.game) // ambient: mixes with the podcast
        h.register("nav", AudioHarness.nav)
        let fx = h.activate("nav", at: 1)
        #expect(fx.contains(.interruptionBegan(id("podcast"), reason: .otherSession)))
        #expect(h.stateOf("podcast") == .interrupted)
        #expect(h.applied("music").gainDb == -14)
        let end = h.deactivate("nav", notify: true, at: 2.5)
        #expect(end.contains(.interruptionEnded(id("podcast"), shouldResume: true)))
        #expect(h.stateOf("podcast") == .active)
    }

    @Test func A3_duckOnlyPromptDucksSpokenAudio() {
        var h = AudioHarness()
        h.start("podcast", AudioHarness.podcast)
        h.start("nav", AudioHarness.duckOnlyNav)
        #expect(h.stateOf("podcast") == .active)
        #expect(h.applied("podcast").gainDb == -14)
    }

    // MARK: A4 Primary interruption

    @Test func A4_callInterruptsEverySessionMixableOrNot() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("game", AudioHarness.game)
        h.start("nav", AudioHarness.nav)
        h.register("call", AudioHarness.call)
        let fx = h.activate("call")
        for s in ["music", "game", "nav"] {
            #expect(fx.contains(.interruptionBegan(id(s), reason: .call)), "\(s)")
            #expect(h.stateOf(s) == .interrupted)
        }
        #expect(h.output("call") == .unity)
    }

    @Test func A4_nonMixableActivationDuringCallFailsWithInsufficientPriority() {
        var h = AudioHarness()
        h.start("call", AudioHarness.call)
        h.register("music", AudioHarness.music)
        #expect(h.activate("music") == [.activationResult(id("music"), .failed(code: .insufficientPriority))])
        #expect(h.stateOf("music") == .inactive)
    }

    @Test func A4_delayedActivationHappensWhenTheCallEnds() {
        var h = AudioHarness()
        h.start("call", AudioHarness.call)
        h.register("music", AudioHarness.music)
        #expect(h.activate("music", acceptsDelay: true) == [.activationResult(id("music"), .delayed)])
        #expect(h.stateOf("music") == .delayed)
        let fx = h.deactivate("call")
        #expect(fx.contains(.delayedActivationCompleted(id("music"), promptStyle: nil)))
        #expect(h.stateOf("music") == .active)
    }

    @Test func A4_mixableSessionActivatesDuckedDuringCallAndPromptIsShort() {
        var h = AudioHarness()
        h.start("call", AudioHarness.call)
        h.register("nav", AudioHarness.nav)
        let fx = h.activate("nav")
        #expect(fx.contains(.activationResult(id("nav"), .activated(promptStyle: .short, ducked: true))))
        #expect(h.applied("nav").gainDb == -14)
        h.deactivate("call")
        #expect(h.applied("nav").gainDb == 0)
        h.deactivate("nav")
        #expect(h.activate("nav").contains(.activationResult(id("nav"), .activated(promptStyle: .normal, ducked: false))))
    }

    // MARK: A5 Resume

    @Test(arguments: [
        // (was playing when interrupted, interrupter notified) → shouldResume
        (true, true, true as Bool?), (false, true, false as Bool?), (true, false, nil as Bool?),
    ])
    func A5_shouldResumeNeedsNotificationAndPlaying(playing: Bool, notify: Bool, expected: Bool?) {
        var h = AudioHarness()
        h.register("music", AudioHarness.music)
        h.send(.playing(id("music"), playing))
        _ = h.activate("music")
        h.register("radio", AudioHarness.music2)
        _ = h.activate("radio")
        let fx = h.deactivate("radio", notify: notify)
        let ended = fx.compactMap { e -> Bool? in
            if case let .interruptionEnded(s, r) = e, s == id("music") { return r } else { return nil }
        }
        #expect(ended.first == expected)
    }

    @Test func A5_callsAlwaysNotify() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("call", AudioHarness.call)
        let fx = h.deactivate("call", notify: false)
        #expect(fx.contains(.interruptionEnded(id("music"), shouldResume: true)))
    }

    @Test func A5_userPausedBeforeCallDoesNotResume() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.send(.playing(id("music"), false), at: 0.5)
        h.start("call", AudioHarness.call)
        #expect(h.deactivate("call").contains(.interruptionEnded(id("music"), shouldResume: false)))
    }

    // MARK: A6 Nesting (the POLICY.md example, scenario 04)

    @Test func A6_promptThenCallMusicReturnsAtFullLevelAfterCall() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.register("nav", AudioHarness.duckOnlyNav)
        h.register("call", AudioHarness.call)
        h.send(.playing(id("nav"), true))
        _ = h.activate("nav", at: 1)
        #expect(h.applied("music").gainDb == -14)
        let call = h.activate("call", at: 2)
        #expect(call.contains(.interruptionBegan(id("music"), reason: .call)))
        #expect(call.contains(.interruptionBegan(id("nav"), reason: .call)))
        // The well-behaved app pauses.
        h.send(.playing(id("music"), false), at: 2.05)
        let navEnd = h.deactivate("nav", at: 3)
        #expect(navEnd.filter { if case .interruptionEnded = $0 { return true } else { return false } }.isEmpty)
        #expect(h.stateOf("music") == .interrupted)
        let callEnd = h.deactivate("call", at: 4)
        #expect(callEnd.contains(.interruptionEnded(id("music"), shouldResume: true)))
        #expect(h.stateOf("music") == .active)
        #expect(h.applied("music") == .unity)
        // Ducked when the call came, music kept that gain while paused and ramps up on resuming.
        #expect(callEnd.contains(.setOutput(id("music"), .unity, rampSeconds: 0.5)))
    }

    @Test func A6_interruptionsStackAndEndWithTheLast() {
        var h = AudioHarness()
        h.start("podcast", AudioHarness.podcast)
        h.start("nav", AudioHarness.nav)
        h.start("call", AudioHarness.call)
        #expect(h.interrupters("podcast") == [id("nav"), id("call")])
        #expect(!h.deactivate("nav").contains { if case .interruptionEnded = $0 { return true } else { return false } })
        #expect(h.stateOf("podcast") == .interrupted)
        #expect(h.deactivate("call").contains(.interruptionEnded(id("podcast"), shouldResume: true)))
    }

    // MARK: A8 Enforcement

    @Test func A8_sessionStillPlayingAfterGraceIsMutedAndUnmutedAtEnd() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("call", AudioHarness.call) // at t=0
        #expect(AudioPolicy.nextDeadline(h.state, config: h.config) == 0.5)
        #expect(h.tick(to: 0.49).isEmpty)
        let fx = h.tick(to: 0.5)
        #expect(fx.contains(.enforcementChanged(id("music"), muted: true)))
        // Interrupted, the session keeps its gain (it was not ducked) and is muted.
        #expect(fx.contains(.setOutput(id("music"), SessionOutput(gainDb: 0, muted: true), rampSeconds: 0)))
        let end = h.deactivate("call", at: 2)
        #expect(end.contains(.enforcementChanged(id("music"), muted: false)))
        #expect(h.applied("music").muted == false)
    }

    @Test func A8_obedientSessionIsNotMuted() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("call", AudioHarness.call)
        h.send(.playing(id("music"), false), at: 0.1)
        #expect(h.tick(to: 5).allSatisfy { if case .enforcementChanged = $0 { return false } else { return true } })
        #expect(h.applied("music").muted == false)
    }

    // MARK: A9 Disconnect and expiry

    @Test func A9_disconnectReleasesDucksAndInterruptionsAtOnce() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("podcast", AudioHarness.game)
        h.start("call", AudioHarness.call)
        let fx = h.send(.clientGone([id("call")]), at: 1)
        #expect(fx.contains(.interruptionEnded(id("music"), shouldResume: true)))
        #expect(fx.contains(.interruptionEnded(id("podcast"), shouldResume: true)))
        #expect(h.state.sessions[id("call")] == nil)
    }

    @Test func A9_duckerWithoutRunningStreamExpires() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.register("nav", AudioHarness.nav)
        _ = h.activate("nav", at: 1)  // never plays
        #expect(AudioPolicy.nextDeadline(h.state, config: h.config) == 11)
        #expect(h.tick(to: 10.9).isEmpty)
        let fx = h.tick(to: 11)
        #expect(fx.first == .expired(id("nav")))
        #expect(fx.contains(.setOutput(id("music"), SessionOutput(gainDb: 0), rampSeconds: 0.5)))
        #expect(h.stateOf("nav") == .inactive)
    }

    /// Expiries due at one tick come in id order. A session resumed by an expiry is not expired in
    /// the same tick: its A9 clock starts again at the resume, as at an activation (it was told to
    /// pause, and gets the whole expiry time to play again).
    @Test func A9_expiriesOfOneTickComeInIdOrderAndOneResumedByAnExpiryGetsTheWholeTimeAgain() {
        var h = AudioHarness()
        h.register("b-nav", AudioHarness.nav)
        _ = h.activate("b-nav", at: 0)  // never plays: due at 10
        h.register("a-call", AudioHarness.call)
        _ = h.activate("a-call", at: 0)  // never plays: due at 10; interrupts the prompt (A4)
        #expect(h.stateOf("b-nav") == .interrupted)
        let fx = h.tick(to: 10)
        let expired = fx.compactMap { if case let .expired(s) = $0 { return s } else { return nil } }
        #expect(expired == [id("a-call")], "\(fx)")
        #expect(fx.contains(.interruptionEnded(id("b-nav"), shouldResume: false)))
        #expect(h.stateOf("b-nav") == .active)
        #expect(AudioPolicy.nextDeadline(h.state, config: h.config) == 20)
        #expect(h.tick(to: 19.9).isEmpty)
        #expect(h.tick(to: 20).first == .expired(id("b-nav")))

        // Two due at once, registered in the reverse order: told in id order.
        var two = AudioHarness()
        two.register("z-nav", AudioHarness.nav)
        _ = two.activate("z-nav", at: 0)
        two.register("m-nav", AudioHarness.nav)
        _ = two.activate("m-nav", at: 0)
        let both = two.tick(to: 10).compactMap { if case let .expired(s) = $0 { return s } else { return nil } }
        #expect(both == [id("m-nav"), id("z-nav")])
    }

    /// A9 after A5: music that paused for a call as told, and interrupts a podcast itself (so it
    /// can expire), gets `interruptionEnded` with `shouldResume` when a call of 12 s ends, and is
    /// not expired at once for the silence the call imposed (a stranger's find: it was, in the
    /// same millisecond, and the podcast resumed instead).
    @Test func A9_aSessionResumedAfterALongCallIsNotExpiredForTheCallsSilence() {
        var h = AudioHarness()
        h.start("podcast", AudioHarness.podcast)
        h.start("music", AudioHarness.music)  // A1: interrupts the podcast
        #expect(h.stateOf("podcast") == .interrupted)
        h.register("call", AudioHarness.call)
        _ = h.activate("call", at: 1)
        h.send(.playing(id("music"), false), at: 1.1)  // paused as told
        h.send(.playing(id("call"), true), at: 1.2)
        let end = h.deactivate("call", at: 13)
        #expect(end.contains(.interruptionEnded(id("music"), shouldResume: true)))
        #expect(!end.contains(.expired(id("music"))), "\(end)")
        #expect(h.stateOf("music") == .active && h.stateOf("podcast") == .interrupted)
        // It plays again within the expiry time: nothing expires.
        h.send(.playing(id("music"), true), at: 13.5)
        #expect(h.tick(to: 40).isEmpty)
        #expect(h.stateOf("music") == .active)
    }

    @Test func A9_playingDuckerDoesNotExpire() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("nav", AudioHarness.nav)
        #expect(h.tick(to: 100).isEmpty)
        #expect(h.stateOf("nav") == .active)
    }

    // MARK: A10 Unmodified apps

    struct RoleCase: Sendable, CustomStringConvertible {
        var role: String; var category: AudioCategory; var mode: AudioMode; var options: Set<AudioSessionOption>
        var description: String { role }
    }

    @Test(arguments: [
        RoleCase(role: "phone", category: .playAndRecord, mode: .voiceChat, options: []),
        RoleCase(role: "music", category: .playback, mode: .default, options: []),
        RoleCase(role: "video", category: .playback, mode: .moviePlayback, options: []),
        RoleCase(role: "game", category: .playback, mode: .default, options: []),
        RoleCase(role: "event", category: .playback, mode: .default, options: [.duckOthers]),
        RoleCase(role: "a11y", category: .playback, mode: .default, options: [.duckOthers]),
        RoleCase(role: "navigation", category: .playback, mode: .voicePrompt, options: [.duckOthers]),
        RoleCase(role: "production", category: .playback, mode: .default, options: [.mixWithOthers]),
    ])
    func A10_implicitSessionFromMediaRole(c: RoleCase) {
        let d = AudioSessionDescriptor.implicit(role: c.role, app: "paplay")
        #expect(d.category == c.category)
        #expect(d.mode == c.mode)
        #expect(d.options == c.options)
        #expect(d.implicit)
    }

    @Test(arguments: [
        (AudioCategory.playAndRecord, AudioMode.voiceChat, [AudioSessionOption](), true),
        (.ambient, .voiceChat, [], false),
        (.playback, .videoChat, [], false),
        (.playback, .moviePlayback, [], true),
        (.playAndRecord, .moviePlayback, [], false),
        (.playback, .spokenAudio, [], true),
        (.soloAmbient, .voicePrompt, [], false),
        (.playback, .voicePrompt, [.duckOthers, .interruptSpokenAudioAndMixWithOthers], true),
        (.ambient, .default, [.mixWithOthers], false),
        (.record, .default, [.duckOthers], false),
        (.ambient, .default, [], true),
    ])
    func A4_categoriesModesAndOptionsGoTogetherAsAVAudioSessionHasIt(category: AudioCategory, mode: AudioMode,
                                                                      options: [AudioSessionOption], ok: Bool) {
        let d = AudioSessionDescriptor(app: "x", category: category, mode: mode, options: Set(options))
        #expect((d.configurationProblem == nil) == ok, "\(d.configurationProblem ?? "allowed")")
        // Every implicit session (A10) is a valid one.
        for role in ["phone", "music", "video", "game", "event", "a11y", "navigation", "other", nil] as [String?] {
            #expect(AudioSessionDescriptor.implicit(role: role, app: "x").configurationProblem == nil)
        }
    }

    @Test(arguments: ["event", "phone", nil] as [String?])
    func A10_N3_aCriticalAlertsStreamGetsNoSession(role: String?) {
        #expect(AudioSessionDescriptor.implicit(role: role, app: "interluded", criticalAlert: true) == nil)
        #expect(AudioSessionDescriptor.implicit(role: role, app: "interluded", criticalAlert: false)
                == AudioSessionDescriptor.implicit(role: role, app: "interluded"))
    }

    @Test func A10_phoneRoleStreamActsAsCall() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("paplay-7", .implicit(role: "phone", app: "paplay"))
        #expect(h.session("music").interruptionReason == .call)
    }

    // MARK: A12 Ringer silent

    @Test(arguments: [
        (AudioCategory.ambient, true), (.soloAmbient, true), (.playback, false), (.playAndRecord, false), (.record, false),
    ])
    func A12_ringerSilentMutesAmbientCategories(category: AudioCategory, muted: Bool) {
        var h = AudioHarness()
        h.start("s", AudioSessionDescriptor(app: "a", category: category))
        h.send(.ringer(silent: true))
        #expect(h.applied("s").muted == muted)
        h.send(.ringer(silent: false))
        #expect(h.applied("s").muted == false)
    }

    @Test func A12_theRingerAlsoMutesInactiveAmbientSessionsThatNoIndexHolds() {
        // The policy derives outputs only for the sessions an event changed (and the live ones when
        // a ducker or call comes or goes) unless the ringer changed: an idle ambient session is
        // none of them, and must still be muted by a silent ringer, and
        // one registered under a silent ringer must start muted.
        var h = AudioHarness()
        h.register("idle", AudioHarness.game)
        #expect(h.state.live.isEmpty)
        h.send(.ringer(silent: true))
        #expect(h.applied("idle").muted)
        h.register("late", AudioHarness.game)
        #expect(h.applied("late").muted)
        h.send(.ringer(silent: false))
        #expect(!h.applied("idle").muted && !h.applied("late").muted)
    }

    // MARK: Cost (issue 9)

    @Test func idleSessionsChangeNeitherTheEffectsNorTheIndexes() {
        // The same timeline with and without 2,000 idle sessions gives the same effects, and the
        // idle ones never enter `live`.
        func run(idle: Int) -> (effects: [AudioPolicyEffect], live: Set<AudioSessionID>) {
            var h = AudioHarness()
            for i in 0..<idle { h.register("idle\(i)", AudioHarness.music) }
            h.log = []
            h.start("music", AudioHarness.music)
            h.start("nav", AudioHarness.nav)
            h.start("call", AudioHarness.call)
            h.deactivate("call")
            h.deactivate("nav")
            h.tick(to: 100)
            return (h.log, h.state.live)
        }
        let plain = run(idle: 0)
        let crowded = run(idle: 2000)
        #expect(crowded.effects == plain.effects)
        #expect(crowded.live == plain.live)
        #expect(!plain.effects.isEmpty)
    }
}

/// What an event costs when many sessions are active (issue 9): the outputs derived again are
/// those of the sessions the event can change, not of every live one.
@Suite struct AudioPolicyCostTests {
    @Test func anEventDerivesTheOutputsOfTheSessionsItCanChangeNotOfEveryActiveOne() {
        var h = AudioHarness()
        h.checksEveryEvent = false
        for i in 0..<1000 { h.start("ambient\(i)", AudioHarness.game) }  // active, playing, mixable
        h.checkConsistency("after 1,000 activations")
        h.checksEveryEvent = true
        h.register("music", AudioHarness.music)
        #expect(h.state.outputsDerivedLastEvent == 1)
        h.send(.playing(id("music"), true))
        #expect(h.state.outputsDerivedLastEvent == 1)
        _ = h.activate("music")  // A1: interrupts no mixable session
        #expect(h.state.outputsDerivedLastEvent == 1)
        h.start("radio", AudioHarness.music2)  // A1: interrupts the music
        #expect(h.stateOf("music") == .interrupted)
        #expect(h.state.outputsDerivedLastEvent == 2)
        // The first ducker changes every active session's output (A2): all of them are derived.
        h.register("nav", AudioHarness.nav)
        let duck = h.activate("nav")
        #expect(h.state.outputsDerivedLastEvent >= 1001)
        #expect(duck.filter { if case .setOutput = $0 { return true } else { return false } }.count == 1001)
        // A second ducker changes nobody else's output.
        h.register("assistant", AudioHarness.assistant)
        _ = h.activate("assistant")
        #expect(h.state.outputsDerivedLastEvent == 1)
        h.deactivate("assistant")
        #expect(h.state.outputsDerivedLastEvent == 1)
        // The last ducker's end undoes every duck.
        let undo = h.deactivate("nav")
        #expect(h.state.outputsDerivedLastEvent >= 1001)
        #expect(undo.filter { if case .setOutput = $0 { return true } else { return false } }.count == 1001)
        // A8: the music kept playing while interrupted; the tick past its grace mutes it alone.
        #expect(h.tick(to: 100).contains(.enforcementChanged(id("music"), muted: true)))
        #expect(h.state.outputsDerivedLastEvent == 1)
        #expect(h.tick(to: 200).isEmpty)
        #expect(h.state.outputsDerivedLastEvent == 0)
    }
}

/// Random timelines (seeded, so a failure replays) of every kind of event over a few sessions of
/// every kind: after each event the harness checks that the indexes agree with the sessions and
/// that every derived output is the one applied (issue 9's indexes must never change a decision).
@Suite struct AudioPolicyRandomTimelineTests {
    static let kinds: [AudioSessionDescriptor] = [
        AudioHarness.music, AudioHarness.music2, AudioHarness.podcast, AudioHarness.nav, AudioHarness.duckOnlyNav,
        AudioHarness.assistant, AudioHarness.call, AudioHarness.game, AudioHarness.solo,
    ]
    static let facts: [PlayerFacts] = [
        PlayerFacts(status: .playing), PlayerFacts(status: .paused), PlayerFacts(status: .stopped),
        PlayerFacts(status: .playing, canPause: false), PlayerFacts(status: .playing, canPause: false, canPlay: false, canControl: false),
    ]

    @Test(arguments: 0..<40)
    func indexesAndOutputsStayInStepWithTheSessions(seed: UInt64) {
        var rng = SplitMix64(state: seed)
        var h = AudioHarness()
        let names = (0..<8).map { "s\($0)" }
        func any<T>(_ xs: [T]) -> T { xs[Int.random(in: 0..<xs.count, using: &rng)] }
        for _ in 0..<300 {
            let n = id(any(names))
            h.now += Double.random(in: 0...3, using: &rng)
            switch Int.random(in: 0..<13, using: &rng) {
            case 0, 1: h.send(.register(n, any(Self.kinds)))
            case 2, 3: h.send(.activate(n, acceptsDelay: Bool.random(using: &rng)))
            case 4: h.send(.deactivate(n, notifyOthers: Bool.random(using: &rng)))
            case 5: h.send(.unregister(n, notifyOthers: Bool.random(using: &rng)))
            case 6: h.send(.clientGone([n, id(any(names))]))
            case 7, 8: h.send(.playing(n, Bool.random(using: &rng)))
            case 9: h.send(.ringer(silent: Bool.random(using: &rng)))
            case 10: h.send(.playerAppeared(n, AudioPolicy.playerDescriptor(app: "p", role: nil, spokenAudio: Bool.random(using: &rng)), any(Self.facts)))
            case 11:
                // Sometimes its streams' role turns it into spoken audio or back (A3 keeps by name
                // the interrupters that no longer follow from the order).
                let spoken = Int.random(in: 0..<3, using: &rng)
                h.send(.playerChanged(n, any(Self.facts), descriptor: spoken == 2 ? nil
                    : AudioPolicy.playerDescriptor(app: "p", role: nil, spokenAudio: spoken == 1)))
            default: h.send(.tick)
            }
        }
        #expect(!h.log.isEmpty)
    }
}

/// A4 with A9: what waits for a call (delayed activations) and a client that leaves.
@Suite struct AudioPolicyDelayTests {
    /// A client that leaves with a call and a session waiting for that call: its waiting session
    /// is dropped before its call ends, so it is not activated on its way out. Another app's
    /// session gets one `interruptionEnded` (it got `interruptionEnded`, `interruptionBegan`,
    /// `interruptionEnded`: a stranger's find).
    @Test func A4_A9_aLeavingClientsWaitingSessionIsNotActivatedByItsOwnCallsEnd() {
        var h = AudioHarness()
        h.start("a", AudioHarness.music)
        h.start("k1", AudioHarness.call)  // its id comes before the waiting one's, as the daemon numbers them
        h.register("k2", AudioHarness.music2)
        #expect(h.activate("k2", acceptsDelay: true) == [.activationResult(id("k2"), .delayed)])
        let fx = h.send(.clientGone([id("k2"), id("k1")]))
        #expect(fx.filter { if case .setOutput = $0 { false } else { true } } == [.interruptionEnded(id("a"), shouldResume: true)], "\(fx)")
        #expect(h.stateOf("a") == .active)
    }

    /// A4: first come, first served. A session that asks again while it waits keeps its place
    /// (it went to the back, and was activated after one that asked later, so it interrupted it);
    /// asked again without `acceptsDelay` it is refused and the earlier request stands.
    @Test func A4_aSessionAskingAgainWhileItWaitsKeepsItsPlace() {
        var h = AudioHarness()
        h.start("k", AudioHarness.call)
        h.register("d", AudioHarness.music)
        h.register("e", AudioHarness.music2)
        _ = h.activate("d", acceptsDelay: true, at: 1)
        _ = h.activate("e", acceptsDelay: true, at: 2)
        #expect(h.activate("d", acceptsDelay: true, at: 3) == [.activationResult(id("d"), .delayed)])
        #expect(h.activate("d", acceptsDelay: false, at: 4) == [.activationResult(id("d"), .failed(code: .insufficientPriority))])
        #expect(h.stateOf("d") == .delayed)
        let fx = h.deactivate("k", at: 5)
        // d first, then e, which interrupts d (A1): e is the one playing at the end.
        let order = fx.compactMap { if case let .delayedActivationCompleted(x, _) = $0 { x } else { nil } }
        #expect(order == [id("d"), id("e")])
        #expect(h.stateOf("e") == .active && h.stateOf("d") == .interrupted)
    }

    /// A4 before A5: when the last call ends, the sessions waiting for it are activated before
    /// what the call interrupted is resumed. A session the waiting one would interrupt (A1, A3)
    /// stays interrupted, told nothing now, and is resumed when the waiting one ends; the others
    /// resume as before. (Resumed first, it got `interruptionEnded` and `interruptionBegan` in the
    /// same event: a player told to play and to pause at once.)
    @Test(arguments: [
        // The waiting session (not mixable: mixable ones do not wait, A4), what was playing when the
        // call came (in the order started), what the waiting one keeps interrupted, what resumes.
        (AudioHarness.music2, ["game", "music"], ["music"], ["game"]),
        (AudioHarness.music2, ["podcast"], ["podcast"], []),
        (AudioHarness.solo, ["game"], [], ["game"]),
    ])
    func A4_A5_theWaitingSessionsAreActivatedBeforeWhatTheCallInterruptedResumes(
        waiting: AudioSessionDescriptor, playing: [String], kept: [String], resumed: [String]
    ) {
        let sessions = ["game": AudioHarness.game, "music": AudioHarness.music, "podcast": AudioHarness.podcast]
        var h = AudioHarness()
        for name in playing { h.start(name, sessions[name]!) }
        h.start("k", AudioHarness.call)
        for name in playing { #expect(h.stateOf(name) == .interrupted) }
        h.register("w", waiting)
        #expect(h.activate("w", acceptsDelay: true, at: 1).first == .activationResult(id("w"), .delayed))
        let fx = h.deactivate("k", at: 2)
        let ended = fx.compactMap { if case let .interruptionEnded(x, _) = $0 { x } else { nil } }
        let began = fx.compactMap { if case let .interruptionBegan(x, _) = $0 { x } else { nil } }
        #expect(Set(ended) == Set(resumed.map { id($0) }))
        #expect(began.isEmpty, "a session resumed by the call's end was interrupted at once: \(fx)")
        #expect(h.stateOf("w") == .active)
        for name in kept { #expect(h.stateOf(name) == .interrupted && h.interrupters(name) == [id("w")]) }
        for name in resumed { #expect(h.stateOf(name) == .active) }
        // When the waiting session ends, what it kept interrupted resumes (it was playing).
        let after = h.deactivate("w", at: 3)
        for name in kept { #expect(after.contains(.interruptionEnded(id(name), shouldResume: true))) }
    }

    /// A4, A5: a call that interrupts another (a call on hold) is not the last call: when it
    /// ends, the call on hold resumes and the sessions waiting keep waiting, until the last call
    /// ends. (Activated first, a waiting `playback` session held the audio over the call on hold.)
    @Test func A4_A5_aCallOnHoldResumesAndTheWaitingSessionsKeepWaiting() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.start("c1", AudioHarness.call)
        h.start("c2", AudioHarness.call)
        #expect(h.stateOf("c1") == .interrupted)
        h.register("w", AudioHarness.music2)
        #expect(h.activate("w", acceptsDelay: true, at: 1).first == .activationResult(id("w"), .delayed))
        let fx = h.deactivate("c2", at: 2)
        #expect(fx.contains(.interruptionEnded(id("c1"), shouldResume: true)))
        #expect(!fx.contains { if case .delayedActivationCompleted = $0 { true } else { false } })
        #expect(h.stateOf("c1") == .active && h.stateOf("w") == .delayed && h.stateOf("music") == .interrupted)
        // A non-mixable activation is still refused: a call is active again.
        h.register("x", AudioHarness.solo)
        #expect(h.activate("x", at: 3) == [.activationResult(id("x"), .failed(code: .insufficientPriority))])
        // The last call ends: the waiting session first, then the music stays interrupted by it.
        let last = h.deactivate("c1", at: 4)
        #expect(last.contains(.delayedActivationCompleted(id("w"), promptStyle: nil)))
        #expect(h.stateOf("w") == .active && h.stateOf("music") == .interrupted)
    }
}

/// A6 with a pile: exclusive sessions activated one after another each interrupt every earlier one
/// (by the order of activations, ``AudioPolicyState/interrupters(of:)``); releasing them keeps the
/// stack's order.
@Suite struct AudioPolicyPileTests {
    @Test func A6_aPileOfExclusiveActivationsUnwindsInOrder() {
        var h = AudioHarness()
        let n = 60
        for i in 0..<n { h.start("s\(i)", AudioHarness.music) }
        for i in 0..<(n - 1) {
            #expect(h.stateOf("s\(i)") == .interrupted)
            #expect(h.interrupters("s\(i)") == Set(((i + 1)..<n).map { id("s\($0)") }))
        }
        // One in the middle leaves: the ones below it stay interrupted by those above it.
        #expect(h.deactivate("s30").isEmpty)
        #expect(h.interrupters("s10").count == n - 12)
        // The top leaves with notification: only the next one down resumes.
        #expect(h.deactivate("s\(n - 1)") == [.interruptionEnded(id("s\(n - 2)"), shouldResume: true)])
        // Another app's exclusive activation joins every set, and its end restores the pile.
        h.start("radio", AudioHarness.music2)
        #expect(h.stateOf("s\(n - 2)") == .interrupted)
        #expect(h.deactivate("radio") == [.interruptionEnded(id("s\(n - 2)"), shouldResume: true)])
        #expect(h.interrupters("s0").count == n - 3)
    }

    /// The pile is kept as an order, not as sets: 2,000 stacked activations keep no interrupter by
    /// name (a set per session held n²/2 entries: 1 GB at 6,000 sessions over the socket), and
    /// releasing half of them from the middle resumes no one and derives a handful of outputs.
    @Test func A6_aPileKeepsNoSetsAndItsMiddleLeavesWithoutTouchingTheRest() {
        var h = AudioHarness()
        h.checksEveryEvent = false  // the checks walk every session: 2,000 × 3,000 events
        let n = 2000
        for i in 0..<n { h.start("s\(i)", AudioHarness.music) }
        #expect(h.state.sessions.values.allSatisfy { $0.keptInterrupters.isEmpty })
        #expect(h.state.exclusiveOrder.count == n && h.interrupters("s0").count == n - 1)
        for i in 500..<1500 {
            #expect(h.deactivate("s\(i)").isEmpty)
            #expect(h.state.outputsDerivedLastEvent <= 2)
        }
        #expect(h.interrupters("s0").count == n - 1001)
        #expect(h.state.indexProblems().isEmpty)
        // The top leaves: the one under it, now the top, resumes, and only it.
        #expect(h.deactivate("s\(n - 1)") == [.interruptionEnded(id("s\(n - 2)"), shouldResume: true)])
    }

    /// A1 with A6: a session whose last interrupter lost its own activation for good (its taker
    /// left without notification) loses its activation for good too, silently, and an A8 mute
    /// on it ends. It was left interrupted by a session that would never tell it anything
    /// (muted for ever if it kept playing), until its own app gave up.
    @Test func A1_A6_whoLosesForGoodTakesTheSessionsItInterruptedWithIt() {
        var h = AudioHarness()
        h.start("music", AudioHarness.music)
        h.send(.playing(id("music"), true))
        h.start("radio", AudioHarness.music2)
        h.now += 1
        h.send(.tick)  // A8: music kept playing past the grace period
        #expect(h.session("music").enforcedMute)
        h.start("game", AudioHarness.solo)
        #expect(h.interrupters("music") == [id("radio"), id("game")])
        let fx = h.send(.deactivate(id("game"), notifyOthers: false))
        #expect(h.stateOf("radio") == .inactive && h.stateOf("music") == .inactive)
        #expect(fx.contains(.enforcementChanged(id("music"), muted: false)))
        #expect(!fx.contains { if case .interruptionEnded = $0 { true } else { false } }, "a loss for good is not told (A1)")
    }

    /// A3 with players: a player whose streams stop being spoken audio while a prompt interrupts
    /// it stays interrupted until that prompt ends (it was interrupted by it); one that becomes
    /// spoken audio while a prompt is active is not interrupted by that prompt (it was not spoken
    /// audio when the prompt began).
    @Test func A3_A6_aPlayerChangingItsSpokenAudioKeepsWhoInterruptedIt() {
        var h = AudioHarness()
        func player(_ name: String, spoken: Bool) {
            h.send(.playerAppeared(id(name), AudioPolicy.playerDescriptor(app: name, role: nil, spokenAudio: spoken), PlayerFacts(status: .playing)))
        }
        player("book", spoken: true)
        player("radio", spoken: false)
        h.start("nav", AudioHarness.nav)
        #expect(h.stateOf("book") == .interrupted && h.stateOf("radio") == .active)
        h.send(.playerChanged(id("book"), PlayerFacts(status: .paused), descriptor: AudioPolicy.playerDescriptor(app: "book", role: nil, spokenAudio: false)))
        h.send(.playerChanged(id("radio"), PlayerFacts(status: .playing), descriptor: AudioPolicy.playerDescriptor(app: "radio", role: nil, spokenAudio: true)))
        #expect(h.interrupters("book") == [id("nav")] && h.session("book").keptInterrupters == [id("nav")])
        #expect(h.stateOf("radio") == .active && h.interrupters("radio").isEmpty)
        #expect(h.deactivate("nav").contains(.interruptionEnded(id("book"), shouldResume: true)))
        #expect(h.stateOf("book") == .active && h.session("book").keptInterrupters.isEmpty)
        // A prompt after the change interrupts the one that is spoken audio now.
        h.start("nav2", AudioHarness.nav)
        #expect(h.stateOf("radio") == .interrupted && h.stateOf("book") == .active)
    }
}
