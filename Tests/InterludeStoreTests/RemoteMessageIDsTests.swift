import Foundation
import InterludePolicy
import Testing
@testable import InterludeStore

/// Issue 11: the remote message ids live in the meta row `remoteMessages`, saved in the same
/// transaction as the decision they led to, so a restart still recognizes a message again.
@Suite struct RemoteMessageIDsTests {
    @Test func N15_remoteMessageIDsSurviveARestart() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        var state = NotificationState()
        state.remoteMessages = ["m-1", "m-2", "m-3"]
        state.apps["org.example.Chat", default: .init()].remoteRegistered = true
        state.apps["org.example.Chat"]!.settings.remote = true
        do {
            let store = try NotificationStore(directory: tmp.storeDirectory)
            try store.save(state)
        }
        let loaded = try NotificationStore(directory: tmp.storeDirectory).load()
        #expect(loaded.remoteMessages == ["m-1", "m-2", "m-3"])
        #expect(loaded.apps["org.example.Chat"]?.remoteRegistered == true)
        #expect(loaded.apps["org.example.Chat"]?.settings.remote == true)
    }

    @Test func N15_aNewMessageIDRewritesOneRow() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try NotificationStore(directory: tmp.storeDirectory)
        var state = NotificationState()
        try store.save(state)
        state.remoteMessages.append("m-1")
        try store.save(state)
        #expect(store.lastSave == StoreSaveStats(updated: 1))
    }

    @Test func aRecordWrittenBeforeRemoteNotificationsDecodes() throws {
        // App rows written by earlier builds have neither remoteRegistered nor settings.remote.
        var record = NotificationAppRecord()
        record.settings.authorization = .authorized
        var object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(record)) as! [String: Any]
        object["remoteRegistered"] = nil
        var settings = object["settings"] as! [String: Any]
        settings["remote"] = nil
        object["settings"] = settings
        let old = try JSONDecoder().decode(NotificationAppRecord.self, from: JSONSerialization.data(withJSONObject: object))
        #expect(old.remoteRegistered == nil && old.settings.remote == nil && old.settings.authorization == .authorized)
    }
}

/// REMOTE.md "Receipts are owed until the broker has them": the receipts owed to providers live in the table `owed_receipt` (schema
/// version 3), a row each, saved in the transaction of the decision they report.
@Suite struct OwedReceiptStoreTests {
    static func receipt(_ id: String) -> OwedReceipt {
        OwedReceipt(app: "org.example.Chat", messageID: id, time: 1_750_000_000.25, payload: #"{"id":"\#(id)","status":"delivered"}"#)
    }

    @Test func N15_owedReceiptsSurviveARestartInOrder() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        var state = NotificationState()
        state.owedReceipts = ["3", "1", "2", "1"].map(Self.receipt)
        try NotificationStore(directory: tmp.storeDirectory).save(state)
        #expect(try NotificationStore(directory: tmp.storeDirectory).load().owedReceipts == state.owedReceipts)
    }

    /// A receipt owed is one row added; receipts acknowledged are their rows removed; a save of a
    /// decision with its receipt while older ones are acknowledged rewrites rows in place.
    @Test func N15_owingAndAcknowledgingWriteOnlyTheirRows() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try NotificationStore(directory: tmp.storeDirectory)
        var state = NotificationState()
        try store.save(state)
        state.owedReceipts = (1...5).map { Self.receipt("\($0)") }
        try store.save(state)
        #expect(store.lastSave == StoreSaveStats(inserted: 5))
        state.owedReceipts.removeFirst(2)
        try store.save(state)
        #expect(store.lastSave == StoreSaveStats(deleted: 2))
        state.owedReceipts.removeFirst()
        state.owedReceipts.append(Self.receipt("6"))
        try store.save(state)
        #expect(store.lastSave == StoreSaveStats(inserted: 1, deleted: 1))
        #expect(try store.connection.integer("SELECT count(*) FROM owed_receipt") == 3)
        #expect(try NotificationStore(directory: tmp.storeDirectory).load().owedReceipts.map(\.messageID) == ["4", "5", "6"])
    }
}
