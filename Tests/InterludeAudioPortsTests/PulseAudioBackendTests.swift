import Foundation
@testable import InterludeAudioPorts
import InterludeEngine
import InterludePulse
import Synchronization
import Testing

/// The backend on a real PulseAudio server: the private one the test script started, found through
/// PULSE_SERVER (Scripts/lib/pulse.sh). With no server: fails under CI=true, else skips.
enum TestServer {
    static func connect(_ name: String) throws -> PulseConnection {
        let environment = ProcessInfo.processInfo.environment
        let server = environment["PULSE_SERVER"]
        let connection = PulseConnection(server: server, clientName: name)
        do {
            try connection.connect(timeout: 3)
            return connection
        } catch {
            let why = "no PulseAudio server reachable (PULSE_SERVER=\(server ?? "unset")): \(error). "
                + "Run Scripts/test-pulse, or source Scripts/lib/pulse.sh and interlude_start_pulse DIR first."
            if environment["CI"] == "true" {
                Issue.record(Comment(rawValue: why))
                throw error
            }
            try Test.cancel(Comment(rawValue: "skipped: " + why))
        }
    }
}

/// Reads a backend's events for the whole test, so that a test can wait for one with a timeout.
final class BackendEvents: Sendable {
    private final class Store: Sendable { let events = Mutex<[AudioBackendEvent]>([]) }
    private let store = Store()
    private let reader: Task<Void, Never>

    init(_ backend: PulseAudioBackend) {
        let store = self.store
        reader = Task.detached {
            for await event in backend.events { store.events.withLock { $0.append(event) } }
        }
    }

    func stop() { reader.cancel() }

    /// The first `streamAdded` of sink input `index`; nil if none came within `timeout` seconds.
    func added(_ index: UInt32, timeout: Double = 5) async -> AudioStream? {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while ContinuousClock.now < deadline {
            let hit = store.events.withLock { $0.lazy.compactMap { if case let .streamAdded(s) = $0, s.index == index { s } else { nil } }.first }
            if let hit { return hit }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }
}

@Suite(.serialized) struct PulseAudioBackendTests {
    static func sinkInput(_ connection: PulseConnection, _ index: UInt32) throws -> PulseSinkInput? {
        try connection.sinkInputs().first { $0.index == index }
    }

    /// A stream at a user volume of −6 dB is ducked to −14 dB and muted through the backend; the
    /// ledger has both. The daemon then "dies" (its connection closes, its ledger file stays as it
    /// was); the next run's backend, on the same file, puts back −6 dB and unmutes the stream before
    /// the engine hears of it.
    @Test func A7_A8_aDuckAndAMuteAreAppliedRecordedAndUndoneByTheNextRun() async throws {
        let app = try TestServer.connect("interlude-audioports-app")
        defer { app.disconnect() }
        let folder = FileManager.default.temporaryDirectory.path + "/interlude-audioports-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let stream = try PulsePlaybackStream(connection: app, name: "tone 523 Hz", source: .sine(frequency: 523, amplitude: 0.25),
                                             properties: [:])
        defer { stream.close() }
        let index = stream.sinkInputIndex
        try await app.setUserVolume(sinkInput: index, db: -6)  // the user's, as a mixer sets it

        let first = try TestServer.connect("interlude-audioports-daemon")
        let ledger = GainLedger(path: folder + "/applied-gains.json")
        let backend = PulseAudioBackend(connection: first, stepSeconds: 0.015, maxStepDb: 1.5, ledger: ledger)
        let events = BackendEvents(backend)
        let seen = try #require(await events.added(index), "the backend never reported the stream")
        #expect(seen.pid == getpid() && seen.appName == "interlude-audioports-app")
        #expect(abs(seen.userVolumeDb + 6) < 0.05 && seen.gainDb == 0 && !seen.muted)

        await backend.rampGain(stream: index, toDb: -14, duration: 0)
        #expect(first.appliedGain(sinkInput: index).map { abs($0 + 14) < 0.01 } == true)
        let ducked = try #require(try Self.sinkInput(app, index))
        #expect(abs(ducked.volumeDb + 20) < 0.05, "user −6 dB × gain −14 dB")
        #expect(ledger.count == 1)
        var saved = try GainLedgerTests.saved(folder + "/applied-gains.json")[String(index)]
        #expect(saved?.pid == getpid() && saved?.app == "interlude-audioports-app")
        #expect(saved.map { abs($0.gainDb + 14) < 0.01 && !$0.muted } == true)
        #expect(saved?.user.map { $0.count == 2 && $0.allSatisfy { abs(Int($0) - 52057) <= 2 } } == true,
                "the user's −6 dB, raw: \(String(describing: saved?.user))")

        await backend.setMute(stream: index, true)
        #expect(try Self.sinkInput(app, index)?.muted == true)
        saved = try GainLedgerTests.saved(folder + "/applied-gains.json")[String(index)]
        #expect(saved?.muted == true)

        // SIGKILL: the file as it is now is what the next run finds.
        try FileManager.default.copyItem(atPath: folder + "/applied-gains.json", toPath: folder + "/left.json")
        events.stop()
        first.disconnect()
        let left = try #require(try Self.sinkInput(app, index))
        #expect(left.muted && abs(left.volumeDb + 20) < 0.05, "the dead daemon's duck and mute stay on the server")

        let second = try TestServer.connect("interlude-audioports-daemon")
        defer { second.disconnect() }
        let nextLedger = GainLedger(path: folder + "/left.json")
        #expect(nextLedger.count == 1)
        let nextBackend = PulseAudioBackend(connection: second, stepSeconds: 0.015, maxStepDb: 1.5, ledger: nextLedger)
        let nextEvents = BackendEvents(nextBackend)
        defer { nextEvents.stop() }
        _ = try #require(await nextEvents.added(index), "the next run's backend never reported the stream")
        let restored = try #require(try Self.sinkInput(app, index))
        #expect(!restored.muted)
        #expect(abs(restored.volumeDb + 6) < 0.05, "the user's −6 dB is back, got \(restored.volumeDb) dB")
        #expect(nextLedger.count == 0)
        #expect(try GainLedgerTests.saved(folder + "/left.json").isEmpty)
    }
}
