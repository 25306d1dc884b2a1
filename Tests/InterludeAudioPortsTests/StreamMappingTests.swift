import InterludeEngine
@testable import InterludeAudioPorts
import InterludePulse
import Testing

// What the engine is told of a sink input: `PulseAudioBackend.stream(_:)`.
@Suite struct StreamMappingTests {
    @Test func A7_A10_aSinkInputBecomesTheEnginesStreamFieldByField() {
        let input = PulseSinkInput(index: 42, clientIndex: 7, processID: 4242, sessionTag: "s-1", role: "music",
                                   applicationName: "Firefox", corked: true, muted: true, volumeDb: -20,
                                   userVolumeDb: -6, gainDb: -14,
                                   properties: ["interlude.daemon": "/run/user/1000/interlude.sock", "interlude.critical": "1"])
        #expect(PulseAudioBackend.stream(input) == AudioStream(
            index: 42, pid: 4242, sessionTag: "s-1", role: "music", appName: "Firefox", corked: true, muted: true,
            userVolumeDb: -6, gainDb: -14, daemonTag: "/run/user/1000/interlude.sock", critical: true, appIdentifiers: []))
    }

    @Test(arguments: [("1", true), ("0", false), ("true", false), ("", false)])
    func N3_onlyInterludeCritical1MarksACriticalStream(value: String, critical: Bool) {
        let input = PulseSinkInput(index: 1, properties: ["interlude.critical": value])
        #expect(PulseAudioBackend.stream(input).critical == critical)
    }

    @Test func A10_aStreamOfAnUnmodifiedAppHasNoDaemonTagOrSession() {
        let stream = PulseAudioBackend.stream(PulseSinkInput(index: 3, processID: 99, role: "phone", applicationName: "pw-play"))
        #expect(stream.daemonTag == nil && stream.sessionTag == nil && !stream.critical && stream.appIdentifiers.isEmpty)
        #expect(stream.role == "phone" && stream.pid == 99 && stream.appName == "pw-play")
    }

    /// Issue 10: an MPRIS player's `DesktopEntry` is matched against these, most specific first.
    @Test func MPRIS_appIdentifiersAreLowercasedMostSpecificFirstAndEmptyOnesDropped() {
        let all = PulseSinkInput(index: 5, properties: [
            "application.process.binary": "Firefox-Bin",
            "application.id": "Firefox",
            "pipewire.access.portal.app_id": "Org.Mozilla.Firefox",
            "application.name": "Ignored",
        ])
        #expect(PulseAudioBackend.stream(all).appIdentifiers == ["org.mozilla.firefox", "firefox", "firefox-bin"])
        let some = PulseSinkInput(index: 6, properties: ["application.id": "", "application.process.binary": "mpv"])
        #expect(PulseAudioBackend.stream(some).appIdentifiers == ["mpv"])
    }
}
