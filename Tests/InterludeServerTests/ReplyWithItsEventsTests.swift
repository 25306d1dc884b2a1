import Foundation
import InterludeConfig
@testable import InterludeEngine
import InterludePolicy
import InterludeTestSupport
import InterludeWire
import Testing

/// Issue 9: a pipelined `notification.add`'s reply is written where its request is settled, inside
/// the same ``OutputGathering`` scope as the request's events, so both leave in one `send` (one
/// wake-up of the client, not two). The handler's callback is registered before the request is
/// decided (``Engine/beginAddNotifications(client:_:whenSettled:)``): registered after the call
/// returned, it ran once the handler was back, outside the scope, when the commit had settled
/// first (the daemon's group-commit leader commits before the handler is back).
@Suite struct ReplyWithItsEventsTests {
    /// Where each line was made: the event's name or "reply", and the scope it was made in.
    typealias Seen = [(what: String, scope: ObjectIdentifier?)]

    /// The gathering scope running on this thread, if any.
    static func scope() -> ObjectIdentifier? { OutputGathering.current.map(ObjectIdentifier.init) }

    /// With the commit held until after the call returned (`held`), and with a store whose
    /// commit is durable at once (settled inside the call).
    @Test(arguments: [true, false]) func N15_aReplyIsMadeInTheScopeOfItsEvents(held: Bool) async throws {
        let store = GatedNotificationStore()
        let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(GroupCommitEngineTests.grant)))
        let engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: FakeSoundPlayer(), store: store, version: "test")
        let seen = LockedBox(Seen())
        let client = await engine.connect(pid: getpid(), sink: { e in seen.withLock { $0.append((e.name, Self.scope())) } })
        _ = try await engine.hello(client: client, app: "org.example.Gathered")
        _ = try await engine.requestAuthorization(client: client, RequestAuthorizationParams(options: [.alert, .badge]))
        seen.withLock { $0.removeAll() }
        if held { store.hold() }
        let batch: [Result<AddNotificationParams, WireError>] = [.success(AddNotificationParams(identifier: "g", title: "t"))]
        _ = await engine.beginAddNotifications(client: client, batch) { _, result in
            let what = (try? result.get().identifier) ?? "error"
            seen.withLock { $0.append((what, Self.scope())) }
        }
        if held { store.release(failing: false) }
        var lines = Seen()
        for _ in 0..<500 {
            lines = seen.withLock { $0 }
            if lines.contains(where: { $0.what == "g" }) { break }
            try await Task.sleep(nanoseconds: 2_000_000)
        }
        let reply = try #require(lines.first { $0.what == "g" })
        let delivered = try #require(lines.first { $0.what == NotificationEventName.delivered })
        #expect(reply.scope != nil, "the reply is made inside a gathering scope")
        #expect(reply.scope == delivered.scope, "the reply is made in the scope of its own delivered event")
        #expect(lines.map(\.what).last == "g", "events first, then the reply")
    }
}
