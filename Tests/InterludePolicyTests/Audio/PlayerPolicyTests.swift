import Testing
import InterludePolicy

/// MPRIS players as implicit sessions (issue 10): one table row per case, each citing its rules
/// (A3, A4, A5, A8, A10). Manual clock, no sleeps.
@Suite struct PlayerPolicyTests {
    /// One step of a timeline. Times are seconds on the manual clock.
    enum Step {
        /// Player `p` appears with these facts (and its role, spoken audio or not).
        case appear(String, PlayerFacts, spoken: Bool = false)
        /// The player reports a new `PlaybackStatus` (the user, or obeying Interlude).
        case status(String, PlaybackStatus, at: Double)
        /// A registered session `name` starts playing (music).
        case music(String)
        /// A call begins / ends.
        case call(at: Double)
        case callEnds(at: Double)
        /// A navigation prompt that interrupts spoken audio (A3) begins / ends.
        case prompt(at: Double)
        case promptEnds(at: Double)
        /// A prompt that only ducks (A2).
        case duckingPrompt(at: Double)
        case tick(at: Double)
        case vanish(String, at: Double)
        /// The daemon stops (``AudioPolicy/a5ResumePlayersAtStop(_:)``).
        case daemonStops
        /// A stream's implicit session `name` plays (music, mixable), as before its player is seen.
        case stream(String)
        /// Player `p` appears and takes over the stream `from` (A10: one app, one session).
        case appearTakingOver(String, PlayerFacts, from: String, at: Double)
    }

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var steps: [Step]
        /// Player and session effects expected in order (pausePlayer, resumePlayer,
        /// enforcementChanged, interruptionEnded of registered sessions); others are ignored.
        var expected: [AudioPolicyEffect]
        /// What `status` shows for each player at the end.
        var finalAction: [String: PlayerAction] = [:]
        var testDescription: String { name }
    }

    static let playing = PlayerFacts(status: .playing)
    static let pausedByUser = PlayerFacts(status: .paused)
    static let cannotPause = PlayerFacts(status: .playing, canPause: false)
    static let uncontrollable = PlayerFacts(status: .playing, canPause: false, canPlay: false, canControl: false)
    static let cannotPlay = PlayerFacts(status: .playing, canPause: true, canPlay: false)

    static let rows: [Row] = [
        Row(name: "A4+A5: a call pauses a playing player (no mute) and Play resumes it after",
            steps: [.appear("p", playing), .call(at: 1), .status("p", .paused, at: 1.01), .tick(at: 2), .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4"), .resumePlayer(id("p"), usePlayPause: false)],
            finalAction: ["p": .resumed]),
        Row(name: "A5: paused by the user before the call: not paused, not resumed",
            steps: [.appear("p", pausedByUser), .call(at: 1), .tick(at: 2), .callEnds(at: 4)],
            expected: [], finalAction: ["p": .leftAlonePausedBefore]),
        Row(name: "A5: resumed by the user during the call: not muted, not paused or resumed again",
            steps: [.appear("p", playing), .call(at: 1), .status("p", .paused, at: 1.01), .status("p", .playing, at: 2),
                    .tick(at: 3), .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4")], finalAction: ["p": .leftAloneUserTouched]),
        Row(name: "A5: stopped by the user during the call: not resumed",
            steps: [.appear("p", playing), .call(at: 1), .status("p", .paused, at: 1.01), .status("p", .stopped, at: 2),
                    .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4")], finalAction: ["p": .leftAloneUserTouched]),
        Row(name: "A5: user resumed and paused again during the call: still left alone",
            steps: [.appear("p", playing), .call(at: 1), .status("p", .paused, at: 1.01), .status("p", .playing, at: 2),
                    .status("p", .paused, at: 2.5), .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4")], finalAction: ["p": .leftAloneUserTouched]),
        Row(name: "A8: CanPause false: muted at once, unmuted at the end, never Pause/Play",
            steps: [.appear("p", cannotPause), .call(at: 1), .tick(at: 2), .callEnds(at: 4)],
            expected: [.enforcementChanged(id("p"), muted: true), .enforcementChanged(id("p"), muted: false)],
            finalAction: ["p": .muted]),
        Row(name: "A8: CanControl false: muted at once",
            steps: [.appear("p", uncontrollable), .call(at: 1), .callEnds(at: 4)],
            expected: [.enforcementChanged(id("p"), muted: true), .enforcementChanged(id("p"), muted: false)],
            finalAction: ["p": .muted]),
        Row(name: "A8: ignores Pause: muted after the grace period (0.5 s), not resumed",
            steps: [.appear("p", playing), .call(at: 1), .tick(at: 1.49), .tick(at: 1.5), .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4"), .enforcementChanged(id("p"), muted: true),
                       .enforcementChanged(id("p"), muted: false)],
            finalAction: ["p": .muted]),
        Row(name: "A8: obeys Pause late but within grace: not muted",
            steps: [.appear("p", playing), .call(at: 1), .tick(at: 1.3), .status("p", .paused, at: 1.45), .tick(at: 2),
                    .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4"), .resumePlayer(id("p"), usePlayPause: false)],
            finalAction: ["p": .resumed]),
        Row(name: "A8 then A5: obeys Pause only after the grace period: muted, then unmuted and resumed at the end",
            steps: [.appear("p", playing), .call(at: 1), .tick(at: 1.5), .status("p", .paused, at: 1.8), .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4"), .enforcementChanged(id("p"), muted: true),
                       .resumePlayer(id("p"), usePlayPause: false), .enforcementChanged(id("p"), muted: false)],
            finalAction: ["p": .resumed]),
        Row(name: "A5: CanPlay false: resumed with PlayPause",
            steps: [.appear("p", cannotPlay), .call(at: 1), .status("p", .paused, at: 1.01), .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4"), .resumePlayer(id("p"), usePlayPause: true)],
            finalAction: ["p": .resumed]),
        Row(name: "A3: a prompt pauses a spoken-audio player and resumes it when it ends",
            steps: [.appear("p", playing, spoken: true), .prompt(at: 1), .status("p", .paused, at: 1.01),
                    .promptEnds(at: 3)],
            expected: [.pausePlayer(id("p"), rule: "A3"), .resumePlayer(id("p"), usePlayPause: false)],
            finalAction: ["p": .resumed]),
        Row(name: "A3/A2: a prompt ducks (does not pause) a music player",
            steps: [.appear("p", playing), .prompt(at: 1), .promptEnds(at: 3)],
            expected: [], finalAction: ["p": .none]),
        Row(name: "A4, A5: two players and a registered session in one call each resume by their own rule",
            steps: [.music("m"), .appear("p1", playing), .appear("p2", pausedByUser), .call(at: 1),
                    .status("p1", .paused, at: 1.01), .callEnds(at: 4)],
            expected: [.pausePlayer(id("p1"), rule: "A4"), .interruptionEnded(id("m"), shouldResume: true),
                       .resumePlayer(id("p1"), usePlayPause: false)],
            finalAction: ["p1": .resumed, "p2": .leftAlonePausedBefore]),
        Row(name: "A5: a player that left the bus during the call gets nothing",
            steps: [.appear("p", playing), .call(at: 1), .vanish("p", at: 2), .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4")]),
        Row(name: "A4 twice: the second call pauses and resumes again (flags reset per interruption)",
            steps: [.appear("p", playing), .call(at: 1), .status("p", .paused, at: 1.01), .callEnds(at: 4),
                    .status("p", .playing, at: 4.01), .call(at: 5), .status("p", .paused, at: 5.01), .callEnds(at: 6)],
            expected: [.pausePlayer(id("p"), rule: "A4"), .resumePlayer(id("p"), usePlayPause: false),
                       .pausePlayer(id("p"), rule: "A4"), .resumePlayer(id("p"), usePlayPause: false)],
            finalAction: ["p": .resumed]),
        // A10 + A4: a player that takes over its stream's interrupted session takes its place (a
        // daemon started again during a call found mpv's stream before mpv: mpv played on under
        // the call, ducked, a stranger's find).
        Row(name: "A10+A4: a player taking over a stream a call interrupted is paused, and resumed after",
            steps: [.stream("s"), .call(at: 1), .appearTakingOver("p", playing, from: "s", at: 2), .status("p", .paused, at: 2.01),
                    .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4"), .resumePlayer(id("p"), usePlayPause: false)],
            finalAction: ["p": .resumed]),
        Row(name: "A10: a player taking over an uninterrupted stream is active; a later call pauses it",
            steps: [.stream("s"), .appearTakingOver("p", playing, from: "s", at: 0.5), .call(at: 1), .status("p", .paused, at: 1.01),
                    .callEnds(at: 4)],
            expected: [.pausePlayer(id("p"), rule: "A4"), .resumePlayer(id("p"), usePlayPause: false)],
            finalAction: ["p": .resumed]),
        Row(name: "A10+A5: a player taking over a stream after the call ended is neither paused nor resumed",
            steps: [.stream("s"), .call(at: 1), .callEnds(at: 2), .appearTakingOver("p", playing, from: "s", at: 3)],
            expected: [.interruptionEnded(id("s"), shouldResume: true)], finalAction: ["p": .none]),
        Row(name: "A10+A4: a paused player taking over a stream a call interrupted is left alone, not resumed",
            steps: [.stream("s"), .call(at: 1), .appearTakingOver("p", pausedByUser, from: "s", at: 2), .callEnds(at: 4)],
            expected: [], finalAction: ["p": .leftAlonePausedBefore]),
        // A5 at the daemon's stop (a stranger's mpv stayed paused for good when the daemon stopped
        // during a call): no pause of Interlude's outlives it, on A5's conditions.
        Row(name: "A5 at the stop: a player paused for a call still going on is resumed",
            steps: [.appear("p", playing), .call(at: 1), .status("p", .paused, at: 1.01), .daemonStops],
            expected: [.pausePlayer(id("p"), rule: "A4"), .resumePlayer(id("p"), usePlayPause: false)],
            finalAction: ["p": .resumed]),
        Row(name: "A5 at the stop: CanPlay false: PlayPause",
            steps: [.appear("p", cannotPlay), .call(at: 1), .status("p", .paused, at: 1.01), .daemonStops],
            expected: [.pausePlayer(id("p"), rule: "A4"), .resumePlayer(id("p"), usePlayPause: true)],
            finalAction: ["p": .resumed]),
        Row(name: "A5 at the stop: touched by the user during the call: left alone",
            steps: [.appear("p", playing), .call(at: 1), .status("p", .paused, at: 1.01), .status("p", .playing, at: 2),
                    .status("p", .paused, at: 2.5), .daemonStops],
            expected: [.pausePlayer(id("p"), rule: "A4")]),
        Row(name: "A5 at the stop: paused by the user before the call: left alone",
            steps: [.appear("p", pausedByUser), .call(at: 1), .daemonStops], expected: []),
        Row(name: "A5 at the stop: not obeyed Pause yet (still Playing): no Play",
            steps: [.appear("p", playing), .call(at: 1), .daemonStops],
            expected: [.pausePlayer(id("p"), rule: "A4")]),
        Row(name: "A5 at the stop: resumed when the call ended already: not again",
            steps: [.appear("p", playing), .call(at: 1), .status("p", .paused, at: 1.01), .callEnds(at: 4), .daemonStops],
            expected: [.pausePlayer(id("p"), rule: "A4"), .resumePlayer(id("p"), usePlayPause: false)],
            finalAction: ["p": .resumed]),
        Row(name: "A5 at the stop: a spoken-audio player paused for a prompt still going on is resumed",
            steps: [.appear("p", playing, spoken: true), .prompt(at: 1), .status("p", .paused, at: 1.01), .daemonStops],
            expected: [.pausePlayer(id("p"), rule: "A3"), .resumePlayer(id("p"), usePlayPause: false)],
            finalAction: ["p": .resumed]),
    ]

    static func relevant(_ e: AudioPolicyEffect, players: Set<String>) -> Bool {
        switch e {
        case .pausePlayer, .resumePlayer: return true
        case let .enforcementChanged(s, _): return players.contains(s.rawValue)
        case let .interruptionEnded(s, _): return !players.contains(s.rawValue) && s.rawValue != "call" && s.rawValue != "nav"
        default: return false
        }
    }

    @Test(arguments: rows) func playerTimeline(_ row: Row) {
        var h = AudioHarness()
        var players: Set<String> = []
        var facts: [String: PlayerFacts] = [:]
        for step in row.steps {
            switch step {
            case let .appear(name, f, spoken):
                players.insert(name)
                facts[name] = f
                h.send(.playerAppeared(id(name), AudioPolicy.playerDescriptor(app: name, role: "music", spokenAudio: spoken), f))
            case let .status(name, st, t):
                facts[name]!.status = st
                h.send(.playerChanged(id(name), facts[name]!, descriptor: nil), at: t)
            case let .music(name): h.start(name, AudioHarness.music)
            case let .call(t):
                if h.state.sessions[id("call")] == nil { h.register("call", AudioHarness.call) }
                h.send(.playing(id("call"), true))
                _ = h.activate("call", at: t)
            case let .callEnds(t): h.deactivate("call", at: t)
            case let .prompt(t):
                if h.state.sessions[id("nav")] == nil { h.register("nav", AudioHarness.nav) }
                h.send(.playing(id("nav"), true))
                _ = h.activate("nav", at: t)
            case let .promptEnds(t): h.deactivate("nav", at: t)
            case let .duckingPrompt(t):
                h.register("nav", AudioHarness.duckOnlyNav)
                _ = h.activate("nav", at: t)
            case let .tick(t): h.tick(to: t)
            case let .vanish(name, t): h.send(.playerVanished(id(name)), at: t)
            case .daemonStops: h.log += AudioPolicy.a5ResumePlayersAtStop(&h.state)
            case let .stream(name):
                h.start(name, AudioSessionDescriptor(app: name, category: .playback, options: [.mixWithOthers], implicit: true))
            case let .appearTakingOver(name, f, old, t):
                players.insert(name)
                facts[name] = f
                h.send(.playerAppeared(id(name), AudioPolicy.playerDescriptor(app: name, role: "music", spokenAudio: false), f,
                                       takingOver: [id(old)]), at: t)
                #expect(h.state.sessions[id(old)] == nil, "the stream's own session goes")
            }
        }
        #expect(h.log.filter { Self.relevant($0, players: players) } == row.expected)
        for (name, action) in row.finalAction {
            #expect(h.state.sessions[id(name)]?.player?.lastAction == action, "\(name)")
        }
    }

    @Test func A10_playerSessionIsMixablePlaybackAndDoesNotInterruptMusic() {
        var h = AudioHarness()
        h.start("m", AudioHarness.music)
        let fx = h.send(.playerAppeared(id("p"), AudioPolicy.playerDescriptor(app: "mpv", role: "music", spokenAudio: false), Self.playing))
        #expect(!fx.contains { if case .interruptionBegan = $0 { true } else { false } })
        #expect(h.stateOf("p") == .active)
        #expect(h.session("p").descriptor.category == .playback)
        #expect(AudioPolicy.playerDescriptor(app: "x", role: nil, spokenAudio: true).mode == .spokenAudio)
        #expect(AudioPolicy.playerDescriptor(app: "x", role: "video", spokenAudio: false).mode == .moviePlayback)
    }

    @Test func A2_promptDucksAMusicPlayerInsteadOfPausingIt() {
        var h = AudioHarness()
        h.send(.playerAppeared(id("p"), AudioPolicy.playerDescriptor(app: "mpv", role: "music", spokenAudio: false), Self.playing))
        h.register("nav", AudioHarness.nav)
        let fx = h.activate("nav", at: 1)
        #expect(fx.contains(.setOutput(id("p"), SessionOutput(gainDb: -14), rampSeconds: 0.3)))
        #expect(!fx.contains(.pausePlayer(id("p"), rule: "A3")))
    }

    @Test func A8_nextDeadlineIsTheGraceAfterPauseAndNoneOnceObeyed() {
        var h = AudioHarness()
        h.send(.playerAppeared(id("p"), AudioPolicy.playerDescriptor(app: "mpv", role: "music", spokenAudio: false), Self.playing))
        h.register("call", AudioHarness.call)
        h.send(.playing(id("call"), true))
        _ = h.activate("call", at: 1)
        #expect(AudioPolicy.nextDeadline(h.state, config: h.config) == 1.5)
        h.send(.playerChanged(id("p"), PlayerFacts(status: .paused), descriptor: nil), at: 1.02)
        #expect(AudioPolicy.nextDeadline(h.state, config: h.config) == nil)
    }
}
