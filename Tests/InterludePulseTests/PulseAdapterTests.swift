import Foundation
import Testing
import InterludePulse
import InterludeScenario

/// The adapter against a real private PulseAudio server; every audio claim is checked in a
/// recording of the null sink's monitor.
@Suite(.serialized) struct PulseAdapterTests {
    @Test("a 440 Hz stream records at 0 dB")
    func sineLevel() async throws {
        let pulse = try TestServer.connect()
        defer { pulse.disconnect() }
        let capture = try Capture(pulse)
        let stream = try tone(pulse, 440)
        defer { stream.close() }
        let t = now() + 0.5
        let level = await capture.level(440, at: t)
        print("440 Hz at \(level) dB; start \(capture.recorder.startTime)")
        #expect(abs(level) <= 1)
    }
}
