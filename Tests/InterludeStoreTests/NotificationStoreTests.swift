import Foundation
import InterludePolicy
@testable import InterludeStore
import Testing

// N15 persistence: pending and delivered notifications, badges, settings and focus survive a
// restart; saves write only what changed; files that are not ours are refused, never crashed on.

@Suite struct NotificationStoreTests {
    @Test func N15_aNewDatabaseLoadsTheEmptyStateInPrivateFiles() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try NotificationStore(directory: tmp.storeDirectory)
        #expect(store.path == tmp.databasePath)
        #expect(try store.load() == NotificationState())
        let folder = try FileManager.default.attributesOfItem(atPath: tmp.storeDirectory)
        #expect((folder[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        let file = try FileManager.default.attributesOfItem(atPath: tmp.databasePath)
        #expect((file[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let raw = try SQLiteDatabase(path: tmp.databasePath, busyTimeoutMilliseconds: 100)
        #expect(try raw.text("PRAGMA journal_mode") == "wal")
        #expect(try raw.integer("PRAGMA user_version") == NotificationStore.schemaVersion)
        #expect(try raw.integer("PRAGMA application_id") == NotificationStore.applicationID)
        #expect(try store.connection.integer("PRAGMA synchronous") == 2)  // FULL
        #expect(try store.connection.text("PRAGMA journal_mode") == "wal")
    }

    @Test func N15_richStateRoundTripsAndSurvivesReopening() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let state = richPolicyState().state
        // Every part is filled, so the round trip cannot pass on defaults.
        #expect(state.clock != nil)
        #expect(state.apps.count == 3)
        #expect(state.apps[Apps.chat]?.badge ?? 0 > 0)
        #expect(state.apps[Apps.chat]?.categories["message"]?.actions.count == 2)
        #expect(state.apps[Apps.chat]?.queuedResponses.map(\.text) == ["on my way"])
        #expect(state.apps[Apps.news]?.settings.showPreviews == .never)
        #expect(state.pending.map(\.request.identifier) == ["wake", "standup"])
        #expect(state.delivered.map(\.request.identifier).contains("m2"))
        #expect(state.delivered.contains { $0.request.identifier == "m3" && $0.decision.rules.contains("N7") })
        #expect(state.summaryQueue.map(\.request.identifier) == ["headline"])
        #expect(!state.coalesced.isEmpty)
        #expect(state.focus.active?.name == "work")
        #expect(state.focus.missed.map(\.identifier).contains("m3"))
        #expect(state.ringerSilent && state.callActive)
        #expect(!state.history.lastAlert.isEmpty && !state.history.updates.isEmpty)
        #expect(state.decisionLog.count > 10)

        do {
            let store = try NotificationStore(directory: tmp.storeDirectory)
            try store.save(state)
            #expect(try store.load() == state)
            store.close()
            #expect(throws: StoreError.self) { try store.load() }
        }
        let reopened = try NotificationStore(directory: tmp.storeDirectory)
        let loaded = try reopened.load()
        #expect(loaded == state)
        #expect(loaded.pending.map(\.request.identifier) == state.pending.map(\.request.identifier))
        #expect(loaded.delivered.map(\.request.identifier) == state.delivered.map(\.request.identifier))
        // The policy carries on from the loaded state as from the original.
        var a = state, b = loaded
        let config = richPolicyState().config
        let later = state.clock! + 7200
        #expect(NotificationPolicy.reduce(&a, .tick, now: later, config: config)
            == NotificationPolicy.reduce(&b, .tick, now: later, config: config))
        #expect(a == b)
    }

    @Test func N15_everyPartOfTheStateHasAPlaceInTheSchema() throws {
        // A field added to NotificationState must be given a row, or it would silently not persist.
        var state = NotificationState()
        state.clock = NotificationTime(1)
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(state)) as? [String: Any]
        let stored = Set(["apps", "pending", "delivered", "decisionLog", "owedReceipts"] + NotificationStore.MetaKey.allCases.map(\.rawValue))
        #expect(Set(object?.keys.map { $0 } ?? []) == stored)
    }

    @Test func N15_aSaveWritesOnlyTheRowsThatChanged() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try NotificationStore(directory: tmp.storeDirectory)
        var d = richPolicyState()
        var changes = store.totalChanges
        /// Saves and checks `lastSave` against SQLite's own count of changed rows.
        func save() throws -> StoreSaveStats {
            try store.save(d.state)
            #expect(store.totalChanges - changes == Int64(store.lastSave.rowsWritten))
            changes = store.totalChanges
            return store.lastSave
        }
        let first = try save()
        let rows = d.state.apps.count + d.state.pending.count + d.state.delivered.count + d.state.decisionLog.count + d.state.owedReceipts.count
            + NotificationStore.MetaKey.allCases.count
        #expect(first == StoreSaveStats(inserted: rows))

        #expect(try save().rowsWritten == 0)  // nothing changed: nothing written

        d.state.apps[Apps.chat]!.badge = 42
        #expect(try save() == StoreSaveStats(updated: 1))

        let i = d.state.delivered.firstIndex { $0.request.identifier == "m2" }!
        d.state.delivered[i].request.content.body = "Running very late"
        #expect(try save() == StoreSaveStats(updated: 1))

        d.state.ringerSilent = false
        #expect(try save() == StoreSaveStats(updated: 1))

        // One new notification through the policy touches a handful of rows, not the whole state.
        d.send(.tick, after: 30)  // releases the coalesced update first
        _ = try save()
        d.post("m4", from: Apps.chat, .init(title: "Dave", body: "hi", sound: "default", badge: 10), after: 30)
        let stats = try save()
        #expect(stats.deleted == 0)
        #expect(stats.inserted == 2)  // the delivered row and its decision-log record
        #expect(stats.updated <= 4)   // app (badge), clock, history, focus (missed)
        #expect(try store.load() == d.state)
    }

    /// Issue 9: an add that pushes the oldest out (N11's center limit, N16's log) rewrites the
    /// oldest's row in place: one row written in the list's table, not an insert at the end and a
    /// delete at the front (whose page SQLite would rebalance with its neighbours).
    @Test func N15_anItemThatReplacesTheOldestTakesItsRow() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try NotificationStore(directory: tmp.storeDirectory)
        var d = richPolicyState()
        try store.save(d.state)
        let oldest = d.state.delivered[0].request.identifier
        let slotOfOldest = try store.connection.integer("SELECT slot FROM delivered WHERE identifier = '\(oldest)'")
        let rowsBefore = try store.connection.integer("SELECT count(*) FROM delivered")
        let maxSlot = try store.connection.integer("SELECT max(slot) FROM delivered")

        var copy = d.state.delivered[0]
        copy.request.identifier = "newest"
        d.state.delivered.removeFirst()
        d.state.delivered.append(copy)
        let changes = store.totalChanges
        try store.save(d.state)
        #expect(store.lastSave == StoreSaveStats(inserted: 1, deleted: 1))
        #expect(store.totalChanges - changes == 1, "one row rewritten, not an insert and a delete")
        #expect(try store.connection.integer("SELECT slot FROM delivered WHERE identifier = 'newest'") == slotOfOldest)
        #expect(try store.connection.integer("SELECT count(*) FROM delivered") == rowsBefore)
        #expect(try store.connection.integer("SELECT max(slot) FROM delivered") == maxSlot)
        #expect(try store.load() == d.state, "in list order: the newest last")
        #expect(try NotificationStore(directory: tmp.storeDirectory).load() == d.state)

        // Removed without a replacement: the row is deleted.
        d.state.delivered.removeLast()
        try store.save(d.state)
        #expect(try store.connection.integer("SELECT count(*) FROM delivered WHERE identifier = 'newest'") == 0)
        #expect(try NotificationStore(directory: tmp.storeDirectory).load() == d.state)
    }

    @Test func N15_removedPartsAreDeleted() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try NotificationStore(directory: tmp.storeDirectory)
        var d = richPolicyState()
        try store.save(d.state)
        let before = (pending: d.state.pending.count, delivered: d.state.delivered.count)

        d.send(.removePending(app: Apps.alarm, identifiers: ["wake"]))
        d.send(.removeDelivered(app: Apps.chat, identifiers: nil))
        d.state.apps[Apps.news] = nil
        d.state.clock = nil
        #expect(d.state.pending.count == before.pending - 1)
        #expect(d.state.delivered.count < before.delivered)
        try store.save(d.state)
        #expect(store.lastSave.deleted == 1 + (before.delivered - d.state.delivered.count) + 1 + 1)
        #expect(try store.load() == d.state)
        store.close()
        #expect(try NotificationStore(directory: tmp.storeDirectory).load() == d.state)

        try NotificationStore(directory: tmp.storeDirectory).save(NotificationState())
        let raw = try SQLiteDatabase(path: tmp.databasePath, busyTimeoutMilliseconds: 100)
        for table in ["app", "pending", "delivered", "decision_log"] {
            #expect(try raw.integer("SELECT count(*) FROM \(table)") == 0)
        }
        #expect(try NotificationStore(directory: tmp.storeDirectory).load() == NotificationState())
    }

    @Test func N15_orderIsKeptWhenItemsMoveOrArriveBetweenOthers() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try NotificationStore(directory: tmp.storeDirectory)
        var state = richPolicyState().state
        try store.save(state)
        // Move the oldest to the end (as an N10 replacement does): one row moves, the others stay.
        state.delivered.append(state.delivered.removeFirst())
        try store.save(state)
        #expect(store.lastSave == StoreSaveStats(inserted: 1, deleted: 1))
        #expect(try store.load() == state)
        // An item between two neighbours with adjacent numbers renumbers the list, still in order.
        var inserted = state.delivered[0]
        inserted.request.identifier = "between"
        state.delivered.insert(inserted, at: 1)
        try store.save(state)
        #expect(try store.load() == state)
        #expect(try NotificationStore(directory: tmp.storeDirectory).load() == state)
    }

    @Test func N15_duplicateIdentifiersKeepTheirOwnRows() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try NotificationStore(directory: tmp.storeDirectory)
        var state = richPolicyState().state
        state.delivered.append(state.delivered[0])
        state.delivered[state.delivered.count - 1].request.content.body = "second copy"
        try store.save(state)
        #expect(try store.load() == state)
        state.delivered.removeFirst()
        try store.save(state)
        #expect(try store.load() == state)
    }

    @Test func N15_anotherConnectionsCommitIsNoticedBeforeDiffing() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let a = try NotificationStore(directory: tmp.storeDirectory)
        let b = try NotificationStore(directory: tmp.storeDirectory)
        let rich = richPolicyState().state
        try a.save(rich)
        try b.save(NotificationState())  // b read the rows before diffing, so it deletes them all
        #expect(try a.load() == NotificationState())
        try a.save(rich)  // a's remembered rows are stale: it must re-read, not skip "unchanged" rows
        #expect(try b.load() == rich)
    }

    @Test func rowDiffKeepsNumbersOfItemsThatStayInOrder() {
        let dummy = ListValue.decision(richPolicyState().state.decisionLog[0])
        /// The rows that turn `old` (numbered `seqs`) into `new`, as "-seq", "~seq:id", "+seq:id", and the new numbers.
        func diff(_ old: [String], _ seqs: [Int64], _ new: [String]) -> (rows: [String], seqs: [Int64]) {
            var rows: [RowChange] = []
            let out = NotificationRowDiffer.diff(.delivered, old: old, seqs: seqs, new: new,
                                                 key: { .init(app: "a", identifier: String($0.prefix(1)), time: 0) },
                                                 value: { _ in dummy }, into: &rows)
            return (rows.map {
                switch $0 {
                case let .delete(_, seq): "-\(seq)"
                case let .update(_, seq, _, id, _): "~\(seq):\(id)"
                case let .insert(_, seq, _, id, _): "+\(seq):\(id)"
                default: "?"
                }
            }, out)
        }
        // Unchanged: nothing.
        #expect(diff(["a", "b"], [1, 2], ["a", "b"]) == ([], [1, 2]))
        // Append and drop the oldest (the decision log at its limit): one delete, one insert.
        #expect(diff(["a", "b", "c"], [1, 2, 3], ["b", "c", "d"]) == (["-1", "+4:d"], [2, 3, 4]))
        // Insert in front of the first.
        #expect(diff(["a", "b"], [5, 6], ["x", "y", "a", "b"]) == (["+3:x", "+4:y"], [3, 4, 5, 6]))
        // Insert where there is room.
        #expect(diff(["a", "b"], [1, 9], ["a", "x", "b"]) == (["+2:x"], [1, 2, 9]))
        // A change in place is an update at the same number ("b2" has the key of "b").
        #expect(diff(["a", "b", "c"], [1, 2, 3], ["a", "b2", "c"]) == (["~2:b"], [1, 2, 3]))
        // A removal in the middle.
        #expect(diff(["a", "b", "c"], [1, 2, 3], ["a", "c"]) == (["-2"], [1, 3]))
        // A move to the end (an N10 replacement): one delete, one insert.
        #expect(diff(["a", "b", "c"], [1, 2, 3], ["b", "c", "a"]) == (["-1", "+4:a"], [2, 3, 4]))
        // No room: everything is renumbered 1…n.
        #expect(diff(["a", "b"], [1, 2], ["a", "x", "b"]) == (["-1", "-2", "+1:a", "+2:x", "+3:b"], [1, 2, 3]))
        // A log at its limit trimmed by a batch of 20, more than the look-ahead (issue 9: a
        // pipelined burst's decisions): 20 deletes and 20 inserts; the 80 kept keep their numbers.
        let log = (0..<100).map { "\(Character(UnicodeScalar(65 + $0 % 26)!))\($0)" }
        let more = (100..<120).map { "\(Character(UnicodeScalar(65 + $0 % 26)!))\($0)" }
        let trimmed = diff(log, Array(1...100), Array(log.dropFirst(20)) + more)
        #expect(trimmed.rows == (1...20).map { "-\($0)" } + (0..<20).map { "+\(101 + $0):\(more[$0].prefix(1))" })
        #expect(trimmed.seqs == Array(21...120))
    }

    @Test func rowDiffOfRandomEditsRebuildsTheListInOrder() {
        // Random appends, removals, moves, in-place changes and duplicates: applying the rows to a
        // table (seq → item) must give the new list in seq order, and the numbers returned.
        var rng = SystemRandomNumberGenerator()
        let records = richPolicyState().state.decisionLog
        for _ in 0..<300 {
            var old = (0..<Int.random(in: 0...30, using: &rng)).map { "k\($0 % 20)v0" }
            var seqs = Array(1...Int64(max(1, old.count))).prefix(old.count).map { $0 * Int64.random(in: 1...3, using: &rng) }
            seqs = seqs.reduce(into: [Int64]()) { $0.append(($0.last ?? 0) + $1) }
            var table = Dictionary(uniqueKeysWithValues: zip(seqs, old))
            for _ in 0..<3 {
                var new = old
                for _ in 0..<Int.random(in: 0...4, using: &rng) {
                    switch Int.random(in: 0..<5, using: &rng) {
                    case 0: new.append("k\(Int.random(in: 0..<40, using: &rng))v0")
                    case 1 where !new.isEmpty: new.remove(at: Int.random(in: 0..<new.count, using: &rng))
                    case 2 where !new.isEmpty: new.append(new.remove(at: Int.random(in: 0..<new.count, using: &rng)))
                    case 3 where !new.isEmpty:
                        let i = Int.random(in: 0..<new.count, using: &rng)
                        new[i] = String(new[i].prefix { $0 != "v" }) + "v\(Int.random(in: 1...9, using: &rng))"
                    case 4: new.insert("k\(Int.random(in: 0..<40, using: &rng))v0", at: Int.random(in: 0...new.count, using: &rng))
                    default: break
                    }
                }
                var rows: [RowChange] = []
                var values: [Int64: String] = [:]  // what each row of `rows` carries, by seq
                let out = NotificationRowDiffer.diff(.decisionLog, old: old, seqs: seqs, new: new,
                                                     key: { .init(app: "a", identifier: String($0.prefix { $0 != "v" }), time: 0) },
                                                     value: { _ in .decision(records[0]) }, into: &rows)
                // The value closure cannot carry the string: recover it from the new list by seq.
                for (seq, item) in zip(out, new) { values[seq] = item }
                for row in rows {
                    switch row {
                    case let .delete(_, seq): #expect(table.removeValue(forKey: seq) != nil, "deleted a row that is not there")
                    case let .update(_, seq, _, _, _): #expect(table[seq] != nil); table[seq] = values[seq]
                    case let .insert(_, seq, _, _, _): #expect(table[seq] == nil, "inserted over a row"); table[seq] = values[seq]
                    default: Issue.record("unexpected row \(row)")
                    }
                }
                #expect(out.count == new.count && zip(out, out.dropFirst()).allSatisfy { $0 < $1 }, "numbers ascend")
                #expect(table.sorted { $0.key < $1.key }.map(\.value) == new, "old \(old) new \(new)")
                old = new
                seqs = out
            }
        }
    }

    // MARK: Files that are not ours

    @Test(arguments: [
        Data("this is a text file, not a database\n".utf8),
        Data(repeating: 0xA5, count: 8192),
        Data("SQLite format 3\u{0}".utf8) + Data(repeating: 0xFF, count: 4096),
    ])
    func aFileThatIsNotADatabaseIsStoreCorruptAndLeftAlone(_ garbage: Data) throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        try FileManager.default.createDirectory(atPath: tmp.storeDirectory, withIntermediateDirectories: true)
        try garbage.write(to: URL(fileURLWithPath: tmp.databasePath))
        let error = #expect(throws: StoreError.self) { try NotificationStore(directory: tmp.storeDirectory) }
        #expect(error?.code == .storeCorrupt)
        #expect(error?.message.contains(tmp.databasePath) == true)
        // As the daemon logs it ("cannot use the state in DIR: \(error)"): the code ends the
        // line in brackets, as the config's, MQTT's and the bus's errors do (not "storeCorrupt: " mid-line).
        #expect(error.map { "\($0)" } == error.map { "\($0.message) [storeCorrupt]" }, "\(String(describing: error))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: tmp.databasePath)) == garbage)
    }

    @Test func aDatabaseOfAnotherProgramIsStoreCorrupt() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        try FileManager.default.createDirectory(atPath: tmp.storeDirectory, withIntermediateDirectories: true)
        do {
            let other = try SQLiteDatabase(path: tmp.databasePath, busyTimeoutMilliseconds: 100)
            try other.execute("CREATE TABLE notes(text TEXT)")
        }
        let noVersion = #expect(throws: StoreError.self) { try NotificationStore(directory: tmp.storeDirectory) }
        #expect(noVersion?.code == .storeCorrupt)
        do {
            let other = try SQLiteDatabase(path: tmp.databasePath, busyTimeoutMilliseconds: 100)
            try other.execute("PRAGMA application_id = 12345")
        }
        let error = #expect(throws: StoreError.self) { try NotificationStore(directory: tmp.storeDirectory) }
        #expect(error?.code == .storeCorrupt)
    }

    @Test func aNewerSchemaIsStoreSchemaTooNewAndLeftAlone() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        try NotificationStore(directory: tmp.storeDirectory).save(richPolicyState().state)
        let newer = NotificationStore.schemaVersion + 1
        do {
            let raw = try SQLiteDatabase(path: tmp.databasePath, busyTimeoutMilliseconds: 100)
            try raw.execute("PRAGMA user_version = \(newer)")
        }
        let error = #expect(throws: StoreError.self) { try NotificationStore(directory: tmp.storeDirectory) }
        #expect(error?.code == .storeSchemaTooNew)
        #expect(error?.message.contains("\(newer)") == true)
        let raw = try SQLiteDatabase(path: tmp.databasePath, busyTimeoutMilliseconds: 100)
        #expect(try raw.integer("PRAGMA user_version") == newer)
        #expect(try raw.integer("SELECT count(*) FROM delivered") > 0)
    }

    @Test func aRowThatDoesNotDecodeIsStoreCorrupt() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        try NotificationStore(directory: tmp.storeDirectory).save(richPolicyState().state)
        do {
            let raw = try SQLiteDatabase(path: tmp.databasePath, busyTimeoutMilliseconds: 100)
            try raw.execute("UPDATE delivered SET json = '{\"app\": 1}' WHERE seq = (SELECT min(seq) FROM delivered)")
        }
        let error = #expect(throws: StoreError.self) { try NotificationStore(directory: tmp.storeDirectory).load() }
        #expect(error?.code == .storeCorrupt)
        #expect(error?.message.contains("delivered") == true)
    }

    @Test func aFolderThatCannotBeCreatedIsStoreOpenFailed() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        try FileManager.default.createDirectory(atPath: tmp.path, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: tmp.path + "/state", contents: Data("a file".utf8)))
        let error = #expect(throws: StoreError.self) { try NotificationStore(directory: tmp.storeDirectory) }
        #expect(error?.code == .storeOpenFailed)
    }

    @Test func theDefaultFolderFollowsXDGStateHome() {
        #expect(NotificationStore.defaultDirectory(environment: ["XDG_STATE_HOME": "/x/state/", "HOME": "/home/u"])
            == "/x/state/interlude")
        #expect(NotificationStore.defaultDirectory(environment: ["HOME": "/home/u"]) == "/home/u/.local/state/interlude")
        // A relative XDG_STATE_HOME is ignored (XDG Base Directory spec).
        #expect(NotificationStore.defaultDirectory(environment: ["XDG_STATE_HOME": "state", "HOME": "/home/u"])
            == "/home/u/.local/state/interlude")
        #expect(NotificationStore.defaultDirectory(environment: [:]).hasSuffix("/.local/state/interlude"))
    }
}
