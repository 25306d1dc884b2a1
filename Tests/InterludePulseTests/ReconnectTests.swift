import Foundation
import Testing
import InterludePulse
import InterludeTestSupport

extension PulseAdapterTests {
    @Test("reconnect: a server that dies gives .disconnected; when it is back, .connected and working calls")
    func reconnect() async throws {
        try TestServer.connect().disconnect()  // the same skip-or-fail rule when PulseAudio is unavailable
        let server = try PrivateAudioServer()
        defer { server.stop() }
        try await server.start()

        let pulse = PulseConnection(server: server.server, clientName: "interlude-reconnect-test")
        defer { pulse.disconnect() }
        let log = EventLog(pulse)
        try pulse.connect()
        pulse.enableReconnect()
        #expect(await log.wait { $0 == .connected } != nil)
        let stream = try tone(pulse, 500)
        let index = stream.sinkInputIndex
        try await pulse.rampGain(sinkInput: index, toDb: -14, duration: 0)

        let mark = log.all.count
        let killed = now()
        try server.kill()
        let down = await log.wait(from: mark, timeout: 5) { $0 == .disconnected }
        let downAt = log.time(from: mark) { $0 == .disconnected } ?? .nan
        #expect(down != nil)
        let whileDown = #expect(throws: PulseError.self) { try pulse.sinkInputs() }
        #expect(whileDown?.code == "notConnected")
        #expect(throws: PulseError.self) { try stream.setCorked(true) }
        stream.close()
        await sleep(1.0)  // down long enough for a few failed attempts: 0.1, 0.3, 0.7 s; the next is at 1.5 s

        let restart = now()
        try await server.start()
        let up = await log.wait(from: mark, timeout: 10) { $0 == .connected }
        let upAt = log.time(from: mark) { $0 == .connected } ?? .nan
        #expect(up != nil)
        // Backoff 0.1 s doubling: attempts at 0.1, 0.3, 0.7, 1.5, 3.1 s after the loss. The server was
        // back at ~1.1 s, so the 1.5 s attempt connects: not sooner (no hammering), not much later.
        #expect(upAt - killed > 1.3 && upAt - killed < 3.5, "reconnected \(upAt - killed) s after the loss")
        let again = try tone(pulse, 500)
        defer { again.close() }
        let listed = try pulse.sinkInputs()
        print("[measured] reconnect: .disconnected \(String(format: "%.3f", downAt - killed)) s after SIGKILL; "
              + "restarted \(String(format: "%.3f", restart - killed)) s after it; .connected \(String(format: "%.3f", upAt - restart)) s after the restart began")
        #expect(listed.contains { $0.index == again.sinkInputIndex && $0.gainDb == 0 })
        #expect(!listed.contains { $0.index == index && $0.gainDb != 0 })
    }
}
