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
