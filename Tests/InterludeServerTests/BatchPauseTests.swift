import Foundation
@testable import InterludeEngine
import InterludeConfig
import InterludePolicy
import InterludeTestSupport
import InterludeWire
import Testing

/// Issue 9: a batch of pipelined `notification.add`s stops between decisions when an audio job
/// waits, commits what it decided, lets the audio job run, and goes on with the rest as another
/// commit. Here the pause is forced after every second decision (the engine's test hook), so the
/// split is deterministic; the replies must be the same as for one batch, in order (N15).
@Suite struct BatchPauseTests {
    @Test func N15_aBatchPausedForAudioCommitsInPartsAndAnswersEveryRequestInOrder() async throws {
        let store = GatedNotificationStore()
        let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(GroupCommitEngineTests.grant)))
        let engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: FakeSoundPlayer(), store: store, version: "test")
        let client = await engine.connect(pid: getpid(), sink: { _ in })
        _ = try await engine.hello(client: client, app: "org.example.Batch")
        _ = try await engine.requestAuthorization(client: client, RequestAuthorizationParams(options: [.alert]))
        let decisions = LockedBox(0)
        await engine.setNotificationBatchPauseForTest { _ in decisions.withLock { $0 += 1; return $0 % 2 == 0 } }
        store.hold()
        let batch: [Result<AddNotificationParams, WireError>] = (0..<5).map { .success(AddNotificationParams(identifier: "b\($0)", title: "t")) }
            + [.failure(WireError(.badRequest, "bad params"))]
        let pendings = await engine.beginAddNotifications(client: client, batch)
        #expect(pendings.count == 6)
        // 2 + 2 + 1 decided (the refused one decides nothing): three commits instead of one.
        #expect(store.heldCount == 3)
        store.release(failing: false)
        var outcomes: [String] = []
        for p in pendings {
            do { outcomes.append(try await p.result().identifier) } catch { outcomes.append(error.code.rawValue) }
        }
        #expect(outcomes == ["b0", "b1", "b2", "b3", "b4", "badRequest"])
        #expect(store.submittedIdentifiers == Set((0..<5).map { "b\($0)" }))
    }
}
