import Foundation
import InterludeClient
import InterludeConfig
import InterludeEngine
import InterludePolicy
import InterludeServer
import InterludeTestSupport
import InterludeWire
import Testing

/// `Engine.remoteMessages` (issue 11, REMOTE.md "Exactly once"): a batch of broker messages is
/// decided in order and saved with one submit to the store (one diff, one commit), and no receipt
/// says saved before that commit is durable (N15); when it fails, every message of the batch is
/// `failed` (the bridge keeps them unacknowledged) and nothing of them stays.
@Suite struct RemoteBatchEngineTests {
    static let app = "org.example.Remote"

    func engine(_ store: GatedNotificationStore) async throws -> (Engine, SocketServer, String) {
        let (engine, server, dir) = try GroupCommitEngineTests().daemon(store)
        let socket = dir + "/socket"
        let a = try await InterludeClient.connect(socket: socket, app: Self.app)
        _ = try await a.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]), as: AuthorizationResult.self)
        _ = try await a.call(RemoteMethod.registerRemote, RegisterRemoteParams(enabled: true), as: RegisterRemoteResult.self)
        a.close()
        let user = try await InterludeClient.connect(socket: socket, app: "org.interlude.CLI")
        var change = SettingsParams(app: Self.app)
        change.remote = true
        _ = try await user.call(NotificationMethod.setSettings, change, as: NotificationAppSettings.self)
        user.close()
        return (engine, server, dir)
    }

    static func message(_ id: String, thread: String = "t") throws -> [UInt8] {
        try RemoteMessage(id: id, app: app, notification: AddNotificationParams(title: "m \(id)", thread: thread)).encoded()
    }

    @Test func N15_aBatchIsOneCommitAndNoReceiptSaysSavedBeforeIt() async throws {
        let store = GatedNotificationStore()
        let (engine, server, dir) = try await engine(store)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: dir) }
        store.hold()
        let batch = [try Self.message("m1"), try Self.message("m2"), Array("{\"v\":1}".utf8), try Self.message("m3"), try Self.message("m1")]
        let task = Task { await engine.remoteMessages(batch) }
        let begin = Date()
        while store.heldCount < 1, Date().timeIntervalSince(begin) < 10 { try await Task.sleep(nanoseconds: 2_000_000) }
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(store.heldCount == 1, "one submit for the whole batch")
        store.release(failing: false)
        let receipts = await task.value
        #expect(receipts.map(\.status) == [.delivered, .delivered, .malformed, .delivered, .duplicate])
        #expect(receipts.map(\.id) == ["m1", "m2", nil, "m3", "m1"])
        let durable = store.shared.withLock { $0.durable }
        #expect(durable.delivered.filter { $0.app == Self.app }.map(\.request.identifier) == ["m1", "m2", "m3"], "in order, once")
        #expect(durable.remoteMessages.suffix(3).map { $0.split(separator: "\u{1F}").last.map(String.init) } == ["m1", "m2", "m3"])
    }

    /// REMOTE.md: a field of the wrong range makes a message malformed, as a wrong type does: it
    /// is answered `malformed` with `badRequest`, nothing is delivered, and its id is not taken,
    /// so the provider's corrected message with the same id is delivered (it was `rejected` and
    /// the id used up).
    @Test(arguments: [
        (#""badge": -1"#, "N12"), (#""criticalVolume": 7"#, "N3"), (#""relevance": 2"#, "N9"),
        (#""trigger": {"in": -5}"#, "N8"), (#""trigger": {"calendar": {"month": 2, "day": 30}}"#, "N8"),
    ])
    func N3_N8_N9_N12_aFieldOutOfRangeIsMalformedAndLeavesTheIdFree(field: String, rule: String) async throws {
        let store = GatedNotificationStore()
        let (engine, server, dir) = try await engine(store)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let bad = Array(#"{"v": 1, "id": "r1", "app": "\#(Self.app)", "title": "t", \#(field)}"#.utf8)
        let first = await engine.remoteMessages([bad])
        #expect(first.map(\.status) == [.malformed], "\(rule): \(first)")
        #expect(first.first?.error?.code == .badRequest && first.first?.id == "r1" && first.first?.app == Self.app, "\(first)")
        #expect(first.first?.rules == [], "a malformed message has no decision")
        let fixed = await engine.remoteMessages([try Self.message("r1")])
        #expect(fixed.map(\.status) == [.delivered], "the same id, corrected: \(fixed)")
        #expect(store.shared.withLock { $0.durable }.delivered.filter { $0.app == Self.app }.map(\.request.identifier) == ["r1"])
    }

    @Test func N15_aFailedCommitFailsTheWholeBatchAndNothingOfItStays() async throws {
        let store = GatedNotificationStore()
        let (engine, server, dir) = try await engine(store)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: dir) }
        store.hold()
        let batch = [try Self.message("f1"), try Self.message("f2")]
        let task = Task { await engine.remoteMessages(batch) }
        let begin = Date()
        while store.heldCount < 1, Date().timeIntervalSince(begin) < 10 { try await Task.sleep(nanoseconds: 2_000_000) }
        store.release(failing: true)
        let failed = await task.value
        #expect(failed.map(\.status) == [.failed, .failed])
        #expect(failed.allSatisfy { $0.error?.code == .storageFailed })
        #expect(store.shared.withLock { $0.durable }.delivered.filter { $0.app == Self.app }.isEmpty)
        // Tried again (the broker delivers them again): decided afresh, not as duplicates.
        let again = await engine.remoteMessages(batch)
        #expect(again.map(\.status) == [.delivered, .delivered])
        #expect(store.shared.withLock { $0.durable }.delivered.filter { $0.app == Self.app }.map(\.request.identifier) == ["f1", "f2"])
    }

    /// REMOTE.md "Receipts are owed until the broker has them": the receipts of a batch are in the
    /// same commit as its decisions (the durable state owes them, the malformed one's too), each
    /// one as published; acknowledged ones leave the state with a later commit; a failed commit
    /// owes nothing.
    @Test func N15_aBatchsReceiptsAreOwedInItsCommitUntilAcknowledged() async throws {
        let store = GatedNotificationStore()
        let (engine, server, dir) = try await engine(store)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: dir) }
        store.hold()
        let batch = [try Self.message("o1"), Array("{\"v\":1}".utf8), try Self.message("o2")]
        let task = Task { await engine.decideRemoteMessages(batch) }
        let begin = Date()
        while store.heldCount < 1, Date().timeIntervalSince(begin) < 10 { try await Task.sleep(nanoseconds: 2_000_000) }
        store.release(failing: false)
        let decided = await task.value
        let owed = decided.compactMap(\.owed)
        #expect(owed.count == 3)
        for d in decided {
            #expect(d.owed?.payload == String(decoding: d.receipt.encoded(), as: UTF8.self), "owed as published")
        }
        #expect(store.shared.withLock { $0.durable }.owedReceipts == owed, "in the decisions' commit")

        await engine.remoteReceiptsAcknowledged([owed[0], owed[2]])
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, store.shared.withLock({ $0.durable }).owedReceipts.count != 1 { try await Task.sleep(nanoseconds: 5_000_000) }
        #expect(store.shared.withLock { $0.durable }.owedReceipts == [owed[1]])
        #expect(await engine.owedReceipts() == [owed[1]])

        store.hold()
        let failing = Task { await engine.decideRemoteMessages([try Self.message("o3")]) }
        let begin2 = Date()
        while store.heldCount < 1, Date().timeIntervalSince(begin2) < 10 { try await Task.sleep(nanoseconds: 2_000_000) }
        store.release(failing: true)
        let failed = try await failing.value
        #expect(failed.map(\.receipt.status) == [.failed] && failed.allSatisfy { $0.owed == nil })
        #expect(await engine.owedReceipts() == [owed[1]], "a failed commit owes nothing")
    }
}
