import InterludeEngine
import InterludePulse

/// The engine's audio port on the PulseAudio adapter: sink inputs become ``AudioStream``s; gains
/// are ramped with the configured step (A2) on top of the user's volume (A7).
final class PulseAudioBackend: AudioBackend, @unchecked Sendable {
    let connection: PulseConnection
    let stepSeconds: Double
    let maxStepDb: Double
    let events: AsyncStream<AudioBackendEvent>

    init(connection: PulseConnection, stepSeconds: Double, maxStepDb: Double) {
        self.connection = connection
        self.stepSeconds = stepSeconds
        self.maxStepDb = maxStepDb
        let source = connection.events
        events = AsyncStream { k in
            let t = Task {
                for await e in source {
                    switch e {
                    case .connected: k.yield(.connected)
                    case .disconnected: k.yield(.disconnected)
                    case let .sinkInputAdded(s): k.yield(.streamAdded(PulseAudioBackend.stream(s)))
                    case let .sinkInputChanged(s): k.yield(.streamChanged(PulseAudioBackend.stream(s)))
                    case let .sinkInputRemoved(i): k.yield(.streamRemoved(i))
                    }
                }
                k.finish()
            }
            k.onTermination = { _ in t.cancel() }
        }
    }

    static func stream(_ s: PulseSinkInput) -> AudioStream {
        AudioStream(index: s.index, pid: s.processID, sessionTag: s.sessionTag, role: s.role, appName: s.applicationName,
                    corked: s.corked, muted: s.muted, userVolumeDb: s.userVolumeDb, gainDb: s.gainDb,
                    daemonTag: s.properties["interlude.daemon"], critical: s.properties["interlude.critical"] == "1")
    }

    func rampGain(stream: UInt32, toDb gainDb: Double, duration: Double) async {
        try? await connection.rampGain(sinkInput: stream, toDb: gainDb, duration: duration,
                                       stepSeconds: stepSeconds, maxStepDb: maxStepDb)
    }

    func setMute(stream: UInt32, _ muted: Bool) async {
        try? await connection.setMute(sinkInput: stream, muted)
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
