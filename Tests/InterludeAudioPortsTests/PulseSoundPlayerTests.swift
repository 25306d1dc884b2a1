import Foundation
@testable import InterludeAudioPorts
import InterludeEngine
import InterludePulse
import InterludeSound
import InterludeWire
import Testing

/// The sound player's errors when a sound cannot play (PROTOCOL.md `sound.play`): with the audio
/// server away the request fails with `audioUnavailable`, not `soundFailed`; when neither the
/// requested sound nor the default can be used, the message says why each failed. No server is
/// needed: the connection is never connected, as while the daemon waits for PulseAudio to come back.
@Suite struct PulseSoundPlayerTests {
    /// The project's `Sounds/` folder (default.wav, critical.wav, …).
    static let projectSounds = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sounds").path

    /// A player on a connection that was never connected (the audio server is away).
    func awayPlayer(defaultName: String = "default") -> PulseSoundPlayer {
        let lookup = SoundLookup(userFolder: nil, projectFolder: Self.projectSounds, dataDirs: [])
        return PulseSoundPlayer(connection: PulseConnection(clientName: "interlude-test-away"), lookup: lookup,
                                defaultName: defaultName, maxDuration: 30, maxBytes: 16 << 20)
    }

    func failure(_ body: () async throws(WireError) -> SoundPlayResult) async -> WireError? {
        do { _ = try await body(); return nil } catch { return error }
    }

    @Test func audioUnavailable_soundPlayWhileTheAudioServerIsAway() async {
        #expect(FileManager.default.fileExists(atPath: Self.projectSounds + "/default.wav"))
        let e = await failure { () async throws(WireError) in try await awayPlayer().play("default", volume: 1, properties: [:]) }
        #expect(e?.code == .audioUnavailable, "\(String(describing: e))")
        #expect(e?.message.contains("not connected") == true, "\(String(describing: e))")
    }

    @Test func audioUnavailable_aMissingSoundWhileTheServerIsAwaySaysWhyItselfFailedToo_S1() async {
        let e = await failure { () async throws(WireError) in try await awayPlayer().play("no-such-sound", volume: 1, properties: [:]) }
        #expect(e?.code == .audioUnavailable, "\(String(describing: e))")
        #expect(e?.message.contains("no-such-sound: no sound named \"no-such-sound\" [soundNotFound]") == true, "\(String(describing: e))")
        #expect(e?.message.contains("default: the audio server is not connected") == true, "\(String(describing: e))")
    }

    /// Not the server: the requested sound and the default are both missing. `soundFailed`, and the
    /// message names both reasons (it used to give only the default's).
    @Test func soundFailed_neitherTheSoundNorTheDefaultSaysBothReasons_S1() async {
        let player = awayPlayer(defaultName: "no-such-default")
        let e = await failure { () async throws(WireError) in try await player.play("no-such-sound", volume: 1, properties: [:]) }
        #expect(e?.code == .soundFailed, "\(String(describing: e))")
        #expect(e?.message == "neither no-such-sound nor the default sound (no-such-default) can play: "
                + "no-such-sound: no sound named \"no-such-sound\" [soundNotFound]; "
                + "no-such-default: no sound named \"no-such-default\" [soundNotFound]", "\(String(describing: e))")
    }
}
