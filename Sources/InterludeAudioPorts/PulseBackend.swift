import Foundation
import InterludeEngine
import InterludePulse

/// The engine's audio port on the PulseAudio adapter: sink inputs become ``AudioStream``s; gains
/// are ramped with the configured step (A2) on top of the user's volume (A7); mutes (A8, A12) and
/// the output's mute (N3) are the server's. What the daemon leaves on streams is kept in a
/// ``GainLedger`` and undone by the next run when it was killed during a duck (A7).
public final class PulseAudioBackend: AudioBackend, @unchecked Sendable {
    let connection: PulseConnection
    let stepSeconds: Double
    let maxStepDb: Double
    /// The server's sink inputs as ``AudioStream``s, and its connects and disconnects, in order (for
    /// one engine). A gain or mute an earlier run left on a stream is undone before the stream's
    /// `streamAdded` (A7, A8, A12); nothing more comes once another daemon holds the claim.
    public let events: AsyncStream<AudioBackendEvent>
    /// What this daemon leaves on streams, saved for the next run (see ``GainLedger``).
    let ledger: GainLedger
    private let identities = StreamIdentities()

    /// Starts reading the connection's events at once (they are buffered in ``events`` until the
    /// engine reads them) and has the connection report user volumes to the ledger (A7).
    /// - Parameters:
    ///   - connection: the connection to the audio server (connected or not: `.connected` comes
    ///     when it is).
    ///   - stepSeconds: most seconds between two volume writes of a ramp (A2; config
    ///     `audio.rampStepMs` / 1000).
    ///   - maxStepDb: largest change of one write of a ramp, dB (config `audio.maxRampStepDb`).
    ///   - ledger: where the gains left on streams are kept across a SIGKILL.
    ///   - log: gets one line for each gain or mute of an earlier run it undoes.
    ///   - onClaimLost: with a connection that announces a ``PulseClaim`` (the daemon's
    ///     `interlude.manager`): called once, with the holder, when another live client of this
    ///     user holds it (after a reconnect another daemon announced itself first, or one that
    ///     connected at the same moment won). From then on no event reaches the engine: this daemon
    ///     manages nothing more (issue 7 hole 12: two managers fight over every volume).
    public init(connection: PulseConnection, stepSeconds: Double, maxStepDb: Double, ledger: GainLedger,
         log: @escaping @Sendable (String) -> Void = { _ in },
         onClaimLost: @escaping @Sendable (PulseClient) -> Void = { _ in }) {
        self.connection = connection
        self.stepSeconds = stepSeconds
        self.maxStepDb = maxStepDb
        self.ledger = ledger
        let source = connection.events
        let identities = self.identities
        // The ledger keeps the user's volume itself (A7), not only the gain: a SIGKILL in the middle
        // of a ramp leaves the stream at some step between the ramp's ends, and no gain written
        // before or after the ramp says which (the torture row "daemon SIGKILLed during load" saw 58
        // of 100 streams off, by up to 11.3 dB). Recording every step instead would still leave one
        // step (up to maxRampStepDb) unknown between the ledger's write and the server's, and cost
        // a file write per 15 ms; the user's volume changes only when the daemon first touches a
        // stream or the user moves it, and the next run can set it back exactly.
        connection.observeUserVolumes { index, user in ledger.recordUser(index, user) }
        events = AsyncStream { k in
            let t = Task {
                var lost = false
                for await e in source {
                    if lost { continue }  // another daemon manages this server: hands off
                    switch e {
                    case .connected:
                        // Before the engine hears of the server (and re-applies ducks to its
                        // streams): is this daemon still the one manager here?
                        if let holder = await PulseAudioBackend.otherClaimHolder(connection) {
                            lost = true
                            onClaimLost(holder)
                            continue
                        }
                        k.yield(.connected)
                    case let .clientChanged(c):
                        // Another daemon announced itself: it holds the claim if it came first
                        // (the two connected at the same moment and this one decided first).
                        guard let key = connection.claim?.key, c.properties[key] != nil,
                              c.index != connection.clientIndex else { continue }
                        if let holder = await PulseAudioBackend.otherClaimHolder(connection) {
                            lost = true
                            onClaimLost(holder)
                        }
                    case .clientRemoved: continue
                    case .disconnected:
                        ledger.forgetAll()  // the streams, and the gains on them, went with the server
                        k.yield(.disconnected)
                    case let .sinkInputAdded(s):
                        // A gain or mute an earlier run left (it was killed during a duck): undone
                        // before the engine sees the stream, which then applies its own output.
                        if let left = ledger.take(s.index, pid: s.processID, app: s.applicationName) {
                            if let user = left.user {
                                // The user's volume back as it was recorded, if the stream is still
                                // under one gain of ours; a volume changed since is the user's.
                                if (try? await connection.adoptUserVolume(sinkInput: s.index, user: user)) == true {
                                    log("stream \(s.index): putting back the user's volume \(user) left under a gain by an earlier run [A7]")
                                    try? await connection.rampGain(sinkInput: s.index, toDb: 0, duration: 0)
                                } else {
                                    log("stream \(s.index): its volume changed since an earlier run left a gain on it; kept as the user's [A7]")
                                }
                            } else if left.keepsUser == true {
                                // Recorded by this version before any gain was written: the
                                // volume is still the user's.
                            } else {  // a ledger written by an older daemon: the gain divided out
                                log("stream \(s.index): undoing gain \(left.gainDb) dB left by an earlier run [A7]")
                                try? await connection.adoptGain(sinkInput: s.index, gainDb: left.gainDb)
                                try? await connection.rampGain(sinkInput: s.index, toDb: 0, duration: 0)
                            }
                            if left.muted {
                                log("stream \(s.index): undoing the mute left by an earlier run [A8, A12]")
                                try? await connection.setMute(sinkInput: s.index, false)
                            }
                        }
                        identities.remember(s)
                        k.yield(.streamAdded(PulseAudioBackend.stream(s)))
                    case let .sinkInputChanged(s):
                        identities.remember(s)
                        k.yield(.streamChanged(PulseAudioBackend.stream(s)))
                    case let .sinkInputRemoved(i):
                        ledger.forget(i)
                        k.yield(.streamRemoved(i))
                    }
                }
                k.finish()
            }
            k.onTermination = { _ in t.cancel() }
        }
    }

    /// The client that holds the connection's claim when it is not this connection; nil when this
    /// connection holds it, announces none, or the server cannot say now (not connected: the next
    /// `.connected` asks again).
    static func otherClaimHolder(_ connection: PulseConnection) async -> PulseClient? {
        guard connection.claim != nil, let holder = try? await connection.claimHolder(),
              let own = connection.clientIndex, holder.index != own else { return nil }
        return holder
    }

    /// Each stream's pid and application name, by sink-input index, for the ledger.
    final class StreamIdentities: @unchecked Sendable {
        private let lock = NSLock()
        private var map: [UInt32: (pid: Int32?, app: String?)] = [:]
        func remember(_ s: PulseSinkInput) { lock.withLock { map[s.index] = (s.processID, s.applicationName) } }
        subscript(_ index: UInt32) -> (pid: Int32?, app: String?) { lock.withLock { map[index] ?? (nil, nil) } }
    }

    private func identity(_ index: UInt32) -> (pid: Int32?, app: String?) { identities[index] }

    static func stream(_ s: PulseSinkInput) -> AudioStream {
        AudioStream(index: s.index, pid: s.processID, sessionTag: s.sessionTag, role: s.role, appName: s.applicationName,
                    corked: s.corked, muted: s.muted, userVolumeDb: s.userVolumeDb, gainDb: s.gainDb,
                    daemonTag: s.properties["interlude.daemon"], critical: s.properties["interlude.critical"] == "1",
                    appIdentifiers: ["pipewire.access.portal.app_id", "application.id", "application.process.binary"]
                        .compactMap { s.properties[$0]?.lowercased() }.filter { !$0.isEmpty })
    }

    /// Ramps the gain on top of the stream's user volume to `gainDb` dB (0 = none, −14 = the A2
    /// duck) over `duration` seconds, in writes at most `stepSeconds` apart and `maxStepDb` dB
    /// large (A2, A7); returns when the ramp is done or superseded by a newer one. The ledger holds
    /// the lower of the start and the target before the ramp, and the applied gain after it.
    /// Errors (the stream went away, the server is away) are swallowed.
    public func rampGain(stream: UInt32, toDb gainDb: Double, duration: Double) async {
        let who = identity(stream)
        // The ledger holds the worst of where the ramp starts and where it goes, written before the
        // ramp, then what the adapter applies when it ends (a newer ramp may have taken over).
        // With the user's volume when the adapter already tracks it (a second duck); else the
        // adapter reports it through `observeUserVolumes` before its first write. (Read before
        // `record` takes the ledger's lock: the observer runs under the connection's lock.)
        let user = connection.userVolume(sinkInput: stream)
        ledger.record(stream, pid: who.pid, app: who.app, gainDb: min(gainDb, connection.appliedGain(sinkInput: stream) ?? 0),
                      muted: nil, user: user)
        try? await connection.rampGain(sinkInput: stream, toDb: gainDb, duration: duration,
                                       stepSeconds: stepSeconds, maxStepDb: maxStepDb)
        ledger.record(stream, pid: who.pid, app: who.app, gainDb: connection.appliedGain(sinkInput: stream) ?? 0, muted: nil)
    }

    /// Mutes or unmutes a stream (A8, A12). A mute is in the ledger before it is written, an unmute
    /// leaves it after. Errors are swallowed.
    public func setMute(stream: UInt32, _ muted: Bool) async {
        let who = identity(stream)
        if muted { ledger.record(stream, pid: who.pid, app: who.app, gainDb: nil, muted: true) }
        try? await connection.setMute(sinkInput: stream, muted)
        if !muted { ledger.record(stream, pid: who.pid, app: who.app, gainDb: nil, muted: false) }
    }

    /// Whether the default sink is muted; nil when the server cannot say (not connected, no
    /// default sink) (N3).
    public func outputMuted() async -> Bool? {
        guard let sink = try? await connection.defaultSinkNameAsync() else { return nil }
        return try? await connection.sinkMutedAsync(sink)
    }

    /// The server as it names itself (e.g. "pulseaudio"); nil while not connected.
    public func serverName() async -> String? { connection.serverName }

    /// Mutes or unmutes the default sink, for a critical sound through a muted output (N3). Errors
    /// are swallowed.
    public func setOutputMuted(_ muted: Bool) async {
        guard let sink = try? await connection.defaultSinkNameAsync() else { return }
        try? await connection.setSinkMuteAsync(sink, muted)
    }
}
