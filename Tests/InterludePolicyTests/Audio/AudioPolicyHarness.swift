import Testing
@testable import InterludePolicy

/// Drives the pure audio arbiter through a timeline with a manual clock and records its effects.
///
/// After every event it checks what the policy's speed rests on (issue 9): the state's indexes
/// agree with the sessions they derive from, and every session's derived output is the one last
/// applied (no output change was missed by deriving only the sessions that can have changed).
struct AudioHarness {
    var state = AudioPolicyState()
    var config = AudioPolicyConfig()
    var now: Double = 0
    var log: [AudioPolicyEffect] = []
    /// Whether every event is followed by ``checkConsistency(_:)`` (off for timelines of thousands
    /// of sessions, which check once at the end).
    var checksEveryEvent = true

    static let music = AudioSessionDescriptor(app: "org.example.Music", category: .playback)
    static let music2 = AudioSessionDescriptor(app: "org.example.Radio", category: .playback)
    static let podcast = AudioSessionDescriptor(app: "org.example.Podcasts", category: .playback, mode: .spokenAudio)
    static let nav = AudioSessionDescriptor(app: "org.example.Maps", category: .playback, mode: .voicePrompt,
                                            options: [.duckOthers, .interruptSpokenAudioAndMixWithOthers])
    static let duckOnlyNav = AudioSessionDescriptor(app: "org.example.Maps", category: .playback, mode: .voicePrompt,
                                                    options: [.duckOthers])
    static let assistant = AudioSessionDescriptor(app: "org.example.Assistant", category: .playback, mode: .voicePrompt,
                                                  options: [.duckOthers])
    static let call = AudioSessionDescriptor(app: "org.example.Phone", category: .playAndRecord, mode: .voiceChat)
    static let game = AudioSessionDescriptor(app: "org.example.Game", category: .ambient)
    static let solo = AudioSessionDescriptor(app: "org.example.Solo", category: .soloAmbient)

    /// Registers a session under a short name used as its id.
    mutating func register(_ name: String, _ d: AudioSessionDescriptor) {
        _ = send(.register(AudioSessionID(name), d))
    }
    /// Registers, activates and marks the session playing.
    mutating func start(_ name: String, _ d: AudioSessionDescriptor) {
        register(name, d)
        send(.playing(AudioSessionID(name), true))
        send(.activate(AudioSessionID(name), acceptsDelay: false))
    }
    @discardableResult
    mutating func send(_ e: AudioPolicyEvent, at t: Double? = nil) -> [AudioPolicyEffect] {
        if let t { now = t }
        let fx = AudioPolicy.reduce(&state, e, now: now, config: config)
        log += fx
        if checksEveryEvent { checkConsistency("after \(e)") }
        return fx
    }

    /// Records an issue for each index out of step with the sessions and each session whose
    /// derived output differs from the one last applied.
    func checkConsistency(_ when: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for problem in state.indexProblems() {
            Issue.record("index out of step \(when): \(problem)", sourceLocation: sourceLocation)
        }
        for s in state.sessions.values {
            let derived = AudioPolicy.output(of: s, in: state, config: config)
            let applied = state.applied[s.id] ?? .unity
            if derived != applied {
                Issue.record("\(s.id) derives \(derived) but \(applied) is applied \(when)", sourceLocation: sourceLocation)
            }
        }
    }
    mutating func activate(_ name: String, acceptsDelay: Bool = false, at t: Double? = nil) -> [AudioPolicyEffect] {
        send(.activate(AudioSessionID(name), acceptsDelay: acceptsDelay), at: t)
    }
    @discardableResult
    mutating func deactivate(_ name: String, notify: Bool = true, at t: Double? = nil) -> [AudioPolicyEffect] {
        send(.deactivate(AudioSessionID(name), notifyOthers: notify), at: t)
    }
    /// Advances the clock and ticks.
    @discardableResult
    mutating func tick(to t: Double) -> [AudioPolicyEffect] { send(.tick, at: t) }

    func session(_ name: String) -> AudioSession { state.sessions[AudioSessionID(name)]! }
    /// A6: every session interrupting `name`.
    func interrupters(_ name: String) -> Set<AudioSessionID> { state.interrupters(of: AudioSessionID(name)) }
    func stateOf(_ name: String) -> AudioSessionState { state.sessions[AudioSessionID(name)]?.state ?? .inactive }
    func output(_ name: String) -> SessionOutput { AudioPolicy.output(of: session(name), in: state, config: config) }
    /// The last output the engine was told to apply.
    func applied(_ name: String) -> SessionOutput { state.applied[AudioSessionID(name)] ?? .unity }
}

func id(_ s: String) -> AudioSessionID { AudioSessionID(s) }
