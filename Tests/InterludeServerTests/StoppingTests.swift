import Foundation
@testable import InterludeEngine
import InterludeConfig
import InterludePolicy
import InterludeTestSupport
import InterludeWire
import Testing

/// The daemon stopping (SIGTERM): the requests being decided still finish and are answered (the
/// server's shutDown, NotificationCrashEndToEndTests' SIGTERM test), but no notification sound
/// starts once it is stopping: the sample would play on after the daemon is gone (a fresh user's
/// finding, issue 9).
@Suite struct StoppingTests {
    final class Lines: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func append(_ l: String) { lock.withLock { lines.append(l) } }
        var all: [String] { lock.withLock { lines } }
    }

    @Test func aNotificationDecidedWhileStoppingIsAnsweredButPlaysNoSound() async throws {
        let sounds = FakeSoundPlayer()
        let log = Lines()
        let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(#"{"authorization": {"default": "grant"}}"#)))
        let engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: sounds, store: MemoryNotificationStore(),
                                version: "test", log: log.append)
        let client = await engine.connect(pid: getpid(), sink: { _ in })
        _ = try await engine.hello(client: client, app: "org.example.Chat")
        _ = try await engine.requestAuthorization(client: client, RequestAuthorizationParams(options: [.alert, .sound]))

        let before = try await engine.addNotification(client: client, AddNotificationParams(identifier: "before", title: "hi", sound: "default"))
        #expect(before.identifier == "before")
        let deadline = Date().addingTimeInterval(5)
        while sounds.plays.isEmpty, Date() < deadline { try await Task.sleep(nanoseconds: 2_000_000) }
        #expect(sounds.plays.count == 1, "the sound of a notification before the stop plays")

        // Another app: the first app's next sound would be silenced by its cooldown anyway (N11).
        let mail = await engine.connect(pid: getpid(), sink: { _ in })
        _ = try await engine.hello(client: mail, app: "org.example.Mail")
        _ = try await engine.requestAuthorization(client: mail, RequestAuthorizationParams(options: [.alert, .sound]))
        await engine.beginStopping()
        let after = try await engine.addNotification(client: mail, AddNotificationParams(identifier: "after", title: "hi", sound: "default"))
        #expect(after.identifier == "after", "a request decided while stopping is still answered")
        // The decision's effects ran before the reply: the log says why the sound did not start.
        #expect(log.all.contains { $0.contains("org.example.Mail/after not played: the daemon is stopping") }, "\(log.all)")
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(sounds.plays.count == 1, "no sound starts once the daemon is stopping")
    }
}
