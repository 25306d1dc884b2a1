import Foundation
import InterludeEngine
import InterludePulse

/// The engine's audio port on the PulseAudio adapter: sink inputs become ``AudioStream``s; gains
/// are ramped with the configured step (A2) on top of the user's volume (A7).
final class PulseAudioBackend: AudioBackend, @unchecked Sendable {
    let connection: PulseConnection
    let stepSeconds: Double
    let maxStepDb: Double
    let events: AsyncStream<AudioBackendEvent>
    /// What this daemon leaves on streams, saved for the next run (see ``GainLedger``).
    let ledger: GainLedger
    private let identities = StreamIdentities()

    /// - Parameter ledger: where the gains left on streams are kept across a SIGKILL.
    init(connection: PulseConnection, stepSeconds: Double, maxStepDb: Double, ledger: GainLedger,
         log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.connection = connection
        self.stepSeconds = stepSeconds
        self.maxStepDb = maxStepDb
        self.ledger = ledger
        let source = connection.events
        let identities = self.identities
        events = AsyncStream { k in
            let t = Task {
                for await e in source {
                    switch e {
                    case .connected: k.yield(.connected)
                    case .disconnected: k.yield(.disconnected)
                    case let .sinkInputAdded(s):
                        // A gain or mute an earlier run left (it was killed during a duck): undone
                        // before the engine sees the stream, which then applies its own output.
                        if let left = ledger.take(s.index, pid: s.processID, app: s.applicationName) {
                            log("stream \(s.index): undoing gain \(left.gainDb) dB\(left.muted ? " and mute" : "") left by an earlier run [A7]")
                            try? await connection.adoptGain(sinkInput: s.index, gainDb: left.gainDb)
                            try? await connection.rampGain(sinkInput: s.index, toDb: 0, duration: 0)
                            if left.muted { try? await connection.setMute(sinkInput: s.index, false) }
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
                    daemonTag: s.properties["interlude.daemon"], critical: s.properties["interlude.critical"] == "1")
    }

    func rampGain(stream: UInt32, toDb gainDb: Double, duration: Double) async {
        let who = identity(stream)
        // The ledger holds the worst of where the ramp starts and where it goes, written before the
        // ramp, then what the adapter applies when it ends (a newer ramp may have taken over).
        ledger.record(stream, pid: who.pid, app: who.app, gainDb: min(gainDb, connection.appliedGain(sinkInput: stream) ?? 0), muted: nil)
        try? await connection.rampGain(sinkInput: stream, toDb: gainDb, duration: duration,
                                       stepSeconds: stepSeconds, maxStepDb: maxStepDb)
        ledger.record(stream, pid: who.pid, app: who.app, gainDb: connection.appliedGain(sinkInput: stream) ?? 0, muted: nil)
    }

    func setMute(stream: UInt32, _ muted: Bool) async {
        let who = identity(stream)
        if muted { ledger.record(stream, pid: who.pid, app: who.app, gainDb: nil, muted: true) }
        try? await connection.setMute(sinkInput: stream, muted)
        if !muted { ledger.record(stream, pid: who.pid, app: who.app, gainDb: nil, muted: false) }
    }

    func outputMuted() async -> Bool? {
        guard let sink = try? connection.defaultSinkName() else { return nil }
        return try? connection.sinkMuted(sink)
    }

    func serverName() async -> String? { connection.serverName }

    func setOutputMuted(_ muted: Bool) async {
        guard let sink = try? connection.defaultSinkName() else { return }
        try? connection.setSinkMute(sink, muted)
    }
}
