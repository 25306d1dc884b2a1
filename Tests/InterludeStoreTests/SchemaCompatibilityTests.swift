import Foundation
import InterludePolicy
@testable import InterludeStore
import Testing

// N15 across versions: a state folder written by an earlier Interlude opens with its state unchanged
// (schema version 1 is migrated to 3 when it opens). The fixture
// `Fixtures/state-d670c78.sqlite3` was written by interluded built from commit d670c78 (the main
// before group commit): Chat and News authorized (News provisional, previews never), Chat's m1
// (badge 3) and m2 (thread bob), News's passive h1, Chat's pending "later" (in a day), focus "work"
// on by hand; the daemon then stopped cleanly (SIGTERM).
@Suite struct SchemaCompatibilityTests {
    static let fixture = fixturePath("state-d670c78.sqlite3")

    @Test func N15_aStateFileOfTheEarlierReleaseOpensUnchangedAndCarriesOn() throws {
        let tmp = try folderHolding(Self.fixture)
        defer { tmp.remove() }
        let original = try Data(contentsOf: URL(fileURLWithPath: tmp.databasePath))

        let store = try NotificationStore(directory: tmp.storeDirectory)
        // Opening migrated it to version 3 (2: list rows in slots of their own, issue 9; 3: the
        // receipts owed to remote providers, none here), in one transaction; every row kept its
        // number as its slot.
        #expect(try store.connection.integer("PRAGMA user_version") == 3)
        #expect(NotificationStore.schemaVersion == 3)
        #expect(try store.connection.integer("SELECT count(*) FROM owed_receipt") == 0)
        #expect(try store.connection.integer("SELECT count(*) FROM delivered WHERE slot = seq") == 3)
        var state = try store.load()
        #expect(state.apps["org.example.Chat"]?.settings.authorization == .authorized)
        #expect(state.apps["org.example.News"]?.settings.authorization == .provisional)
        #expect(state.apps["org.example.News"]?.settings.showPreviews == .never)
        #expect(state.delivered.map(\.request.identifier) == ["m1", "m2", "h1"])
        #expect(state.delivered[1].request.content.threadIdentifier == "bob")
        #expect(state.pending.map(\.request.identifier) == ["later"])
        #expect(state.apps["org.example.Chat"]?.badge ?? 0 >= 3)
        #expect(state.focus.active?.name == "work" && state.focus.active?.manual == true)
        #expect(state.decisionLog.map(\.identifier).contains("h1"))
        store.close()
        #expect(try Data(contentsOf: URL(fileURLWithPath: tmp.databasePath)) != original, "migrated")
        // A file of this version: opening and loading write nothing.
        let migrated = try Data(contentsOf: URL(fileURLWithPath: tmp.databasePath))
        let reopened = try NotificationStore(directory: tmp.storeDirectory)
        #expect(try reopened.load() == state)
        reopened.close()
        #expect(try Data(contentsOf: URL(fileURLWithPath: tmp.databasePath)) == migrated)

        // The current store carries on from it: a change is a few rows, and reads back.
        let again = try NotificationStore(directory: tmp.storeDirectory)
        #expect(try again.load() == state)
        state.apps["org.example.Chat"]!.badge = 9
        state.delivered.removeFirst()
        try again.save(state)
        // The badge's app row and the removed notification; and, once, the `remoteMessages` meta
        // row that files written before remote notifications (issue 11) do not have.
        #expect(again.lastSave == StoreSaveStats(inserted: 1, updated: 1, deleted: 1))
        #expect(try NotificationStore(directory: tmp.storeDirectory).load() == state)
    }
}

// The same for schema version 2, the release before receipts were owed in the state (REMOTE.md
// "Receipts"). The fixture `Fixtures/state-875639a.sqlite3` was written by interluded built from
// commit 875639a: Chat authorized, remote on and registered, m1 (badge 2, thread alice) and m2
// delivered, "later" pending (in a day), focus "work" on by hand; then SIGTERM.
@Suite struct SchemaVersion2CompatibilityTests {
    static let fixture = fixturePath("state-875639a.sqlite3")

    @Test func N15_aStateFileOfVersion2OpensUnchangedAndOwesReceiptsFromThenOn() throws {
        let tmp = try folderHolding(Self.fixture)
        defer { tmp.remove() }
        let before = try SQLiteDatabase(path: tmp.databasePath, busyTimeoutMilliseconds: 100)
        #expect(try before.integer("PRAGMA user_version") == 2)
        before.close()

        let store = try NotificationStore(directory: tmp.storeDirectory)
        #expect(try store.connection.integer("PRAGMA user_version") == 3)
        var state = try store.load()
        let chat = "org.example.Chat"
        #expect(state.apps[chat]?.settings.authorization == .authorized)
        #expect(state.apps[chat]?.settings.remote == true && state.apps[chat]?.remoteRegistered == true)
        #expect(state.delivered.map(\.request.identifier) == ["m1", "m2"])
        #expect(state.delivered[0].request.content.threadIdentifier == "alice")
        #expect(state.pending.map(\.request.identifier) == ["later"])
        #expect(state.focus.active?.name == "work")
        #expect(state.owedReceipts.isEmpty)

        state.owedReceipts = [OwedReceipt(app: chat, messageID: "r-1", time: 1, payload: "{}")]
        try store.save(state)
        #expect(store.lastSave == StoreSaveStats(inserted: 1))
        store.close()
        #expect(try NotificationStore(directory: tmp.storeDirectory).load() == state)
    }
}

/// A fixture of `Fixtures/` by file name.
private func fixturePath(_ name: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/" + name).path
}

/// A temporary state folder whose database is a copy of `fixture`.
private func folderHolding(_ fixture: String) throws -> TemporaryFolder {
    let tmp = TemporaryFolder()
    try FileManager.default.createDirectory(atPath: tmp.storeDirectory, withIntermediateDirectories: true)
    try FileManager.default.copyItem(atPath: fixture, toPath: tmp.databasePath)
    return tmp
}
