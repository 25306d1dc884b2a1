import Foundation
import Testing
import InterludePulse
import InterludeScenario
import Synchronization

/// The private server the test script started (Scripts/lib/pulse.sh), found through PULSE_SERVER.
enum TestServer {
    static var sink: String { ProcessInfo.processInfo.environment["INTERLUDE_TEST_SINK"] ?? "interlude_out" }
    static var monitor: String { sink + ".monitor" }

    /// A connected connection to the test server. With no server: fails under CI=true, else skips.
    static func connect(_ name: String = "interlude-tests", properties: [String: String] = [:]) throws -> PulseConnection {
        let environment = ProcessInfo.processInfo.environment
        let server = environment["PULSE_SERVER"]
        let connection = PulseConnection(server: server, clientName: name, properties: properties)
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

/// Collects a connection's events so tests can wait for one with a timeout.
final class EventLog: Sendable {
    private final class Store: Sendable { let events = Mutex<[(time: Double, event: PulseEvent)]>([]) }
    private let store = Store()
    private let task: Task<Void, Never>

    init(_ connection: PulseConnection) {
        let store = self.store
        task = Task.detached {
            for await event in connection.events { store.events.withLock { $0.append((now(), event)) } }
        }
    }

    deinit { task.cancel() }

    var all: [PulseEvent] { store.events.withLock { $0.map(\.event) } }

    /// When (monotonic seconds) the first event after position `from` matching `match` arrived.
    func time(from: Int = 0, of match: (PulseEvent) -> Bool) -> Double? {
        store.events.withLock { $0.dropFirst(from).first { match($0.event) }?.time }
    }

    /// Waits until an event after position `from` satisfies `match`; returns it, or nil on timeout.
    func wait(from: Int = 0, timeout: Double = 3, _ match: (PulseEvent) -> Bool) async -> PulseEvent? {
        let deadline = PulseClock.monotonicSeconds() + timeout
        while true {
            let events = all
            if from < events.count, let hit = events[from...].first(where: match) { return hit }
            if PulseClock.monotonicSeconds() > deadline { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// The changes of one sink input after position `from`.
    func changes(of index: UInt32, from: Int = 0) -> [PulseSinkInput] {
        all.dropFirst(from).compactMap {
            if case let .sinkInputChanged(input) = $0, input.index == index { return input }
            return nil
        }
    }
}

/// Records the null sink's monitor and measures tones at monotonic times.
final class Capture: Sendable {
    let recorder: PulseRecorder
    let rate = 48000

    init(_ connection: PulseConnection) throws {
        recorder = try PulseRecorder(connection: connection, source: TestServer.monitor, sampleRate: rate)
    }

    /// Waits until the recording covers monotonic time `t` plus `margin` seconds.
    func waitUntilRecorded(_ t: Double, margin: Double = 0.15) async {
        while true {
            let end = recorder.startTime + Double(recorder.samples().count) / Double(rate)
            if end >= t + margin { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The level in dB of `frequency` at monotonic time `t` (median over ±50 ms), 0 dB = a 0.25 sine.
    func level(_ frequency: Double, at t: Double) async -> Double {
        await waitUntilRecorded(t)
        return ToneAnalysis.level(samples: recorder.samples(), sampleRate: rate, frequency: frequency,
                                  at: t - recorder.startTime)
    }

    /// Levels of consecutive windows (40 ms, hop 20 ms) whose centres lie between monotonic t0 and t1.
    func levels(_ frequency: Double, from t0: Double, to t1: Double) async -> [Double] {
        await waitUntilRecorded(t1)
        let all = ToneAnalysis.levels(samples: recorder.samples(), sampleRate: rate, frequency: frequency)
        let start = recorder.startTime
        return all.enumerated().filter { i, _ in
            let centre = start + Double(i) * 0.02 + 0.02
            return centre >= t0 && centre <= t1
        }.map(\.element)
    }
}

func now() -> Double { PulseClock.monotonicSeconds() }

func sleep(_ seconds: Double) async { try? await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }

/// A sine stream at the scenario amplitude (0.25).
func tone(_ connection: PulseConnection, _ frequency: Double, properties: [String: String] = [:]) throws -> PulsePlaybackStream {
    try PulsePlaybackStream(connection: connection, name: "tone \(Int(frequency)) Hz",
                            source: .sine(frequency: frequency, amplitude: 0.25), properties: properties)
}
