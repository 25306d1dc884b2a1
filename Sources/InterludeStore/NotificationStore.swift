#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import InterludePolicy
import InterludeWire

/// Persists the notification policy's `NotificationState` in SQLite so that pending and delivered
/// notifications, badges, settings and the focus state survive a restart and a crash (POLICY.md
/// N15).
///
/// The database is `interlude.sqlite3` in the store's folder (`defaultDirectory`:
/// `$XDG_STATE_HOME/interlude`), in WAL journal mode with `synchronous=FULL`: a `save` that
/// returned is on disk, and a process killed at any moment (even `kill -9` in the middle of a save)
/// leaves the state of one complete `save`, never a mix, because every save is one transaction.
///
/// Schema, version 3 (`PRAGMA user_version`; `PRAGMA application_id` = `0x496E746C`, "Intl").
/// Every `json` column holds one value encoded with `JSONEncoder` (sorted keys):
///
/// | table | columns | holds |
/// |---|---|---|
/// | `app` | `app_id TEXT PRIMARY KEY`, `json` | `NotificationAppRecord` of `state.apps[app_id]` (settings, authorization, categories, badge, queued responses) |
/// | `pending` | `slot INTEGER PRIMARY KEY`, `seq`, `app_id`, `identifier`, `json` | `PendingNotification`s, in `seq` order |
/// | `delivered` | `slot INTEGER PRIMARY KEY`, `seq`, `app_id`, `identifier`, `json` | `DeliveredNotification`s (the center), in `seq` order |
/// | `decision_log` | `slot INTEGER PRIMARY KEY`, `seq`, `app_id`, `identifier`, `json` | `NotificationDecisionRecord`s (N16), in `seq` order |
/// | `owed_receipt` | `slot INTEGER PRIMARY KEY`, `seq`, `app_id`, `identifier` (the message id), `json` | `OwedReceipt`s (remote receipts not yet acknowledged by the broker; version 3), in `seq` order |
/// | `meta` | `key TEXT PRIMARY KEY`, `json` | one row each: `clock` (absent while nil), `focus`, `ringerSilent`, `callActive`, `history`, `summaryQueue`, `coalesced`, `remoteMessages` (the recent remote message ids, issue 11; absent in files written before it = none) |
///
/// `seq` orders a list; numbers may have gaps, so an appended or removed item does not renumber the
/// others. `slot` is where a row lives (its key in SQLite's b-tree), not its place in the list: a
/// save that removes one item and adds another (a new notification that pushes the app's oldest
/// out of the center, N11; a decision that trims the log, N16) rewrites the removed item's row in
/// place with the new one. The row's page is written once, instead of a new row at the end and a
/// removal at the front, whose page SQLite then rebalances with its neighbours: 3–4 pages per add
/// fewer (issue 9; version 1 keyed the rows by `seq`). A save writes only the rows whose value (or place) changed since the last save or load,
/// found by comparing the state with the one the store last took (`NotificationRowDiffer`), not by
/// encoding the state: a new notification is a handful of row writes (`lastSave` counts them);
/// unchanged saves do not touch the file. `write(_:)` commits several changes in one transaction
/// (the group commit of `SQLiteNotificationStore`).
///
/// One store per database file: the daemon opens it once. If another connection commits to the
/// file, the next save notices (`PRAGMA data_version`) and re-reads the rows before diffing. Not
/// thread-safe: use it from one thread or actor at a time.
public final class NotificationStore {
    /// The schema version this build writes and reads (`PRAGMA user_version`).
    public static let schemaVersion = Int64(migrations.count)
    /// The database file's name inside the store's folder.
    public static let fileName = "interlude.sqlite3"
    /// How long a statement waits for another connection's lock before `storeBusy`, in milliseconds.
    public static let busyTimeoutMilliseconds: Int32 = 2000

    /// `PRAGMA application_id` of Interlude's database ("Intl").
    static let applicationID: Int64 = 0x496E_746C

    /// Schema migrations: entry `i` takes the database from version `i` to `i + 1`. Append only.
    static let migrations: [String] = [
        """
        CREATE TABLE app(app_id TEXT PRIMARY KEY NOT NULL, json TEXT NOT NULL);
        CREATE TABLE pending(seq INTEGER PRIMARY KEY, app_id TEXT NOT NULL, identifier TEXT NOT NULL, json TEXT NOT NULL);
        CREATE TABLE delivered(seq INTEGER PRIMARY KEY, app_id TEXT NOT NULL, identifier TEXT NOT NULL, json TEXT NOT NULL);
        CREATE TABLE decision_log(seq INTEGER PRIMARY KEY, app_id TEXT NOT NULL, identifier TEXT NOT NULL, json TEXT NOT NULL);
        CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, json TEXT NOT NULL);
        """,
        // 2: list rows keyed by a slot of their own (see the type's documentation); `seq` keeps the
        // order. Every row keeps its number as its slot.
        ["pending", "delivered", "decision_log"].map { table in
            """
            CREATE TABLE \(table)_v2(slot INTEGER PRIMARY KEY, seq INTEGER NOT NULL, app_id TEXT NOT NULL, identifier TEXT NOT NULL, json TEXT NOT NULL);
            INSERT INTO \(table)_v2(slot, seq, app_id, identifier, json) SELECT seq, seq, app_id, identifier, json FROM \(table);
            DROP TABLE \(table);
            ALTER TABLE \(table)_v2 RENAME TO \(table);
            """
        }.joined(separator: "\n"),
        // 3: the receipts the device owes remote providers (`NotificationState.owedReceipts`).
        """
        CREATE TABLE owed_receipt(slot INTEGER PRIMARY KEY, seq INTEGER NOT NULL, app_id TEXT NOT NULL, identifier TEXT NOT NULL, json TEXT NOT NULL);
        """,
    ]

    /// The database file's path.
    public let path: String
    /// What the last successful `save` wrote; all zero if it found nothing changed (a failed save
    /// leaves it as it was).
    public private(set) var lastSave = StoreSaveStats()

    private let db: SQLiteDatabase
    private var statements: Statements?
    /// The state the database holds as of our last load or save, to diff the next save against;
    /// nil = unknown (read before diffing).
    private var differ: NotificationRowDiffer?
    /// `PRAGMA data_version` after our last load or save: another connection's commit changes it.
    private var dataVersion: Int64 = 0
    /// The slot of every list row, as of our last load or save (read again with the rows).
    private var slots = ListSlots()
    private let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        e.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "+Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        return e
    }()
    private let decoder: JSONDecoder = {
        let d = JSONDecoder()
        d.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "+Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        return d
    }()

    /// Opens the store in `directory`, creating the folder (mode 0700, with missing parents) and
    /// `interlude.sqlite3` (mode 0600) if they do not exist, and bringing the schema up to
    /// `schemaVersion`.
    ///
    /// - Parameter directory: the store's folder, usually `defaultDirectory()`; tests pass a temporary one.
    /// - Throws: `StoreError` with code `storeOpenFailed` (folder or file cannot be created or
    ///   opened), `storeCorrupt` (not a database, damaged, or another program's database; the file is
    ///   not changed), `storeSchemaTooNew` (written by a newer Interlude; not changed), `storeBusy`,
    ///   `storeIOError`.
    public init(directory: String) throws {
        try StateFolder.make(directory)
        path = StateFolder.path(of: Self.fileName, in: directory)
        // Create the file ourselves so that it (and SQLite's -wal and -shm beside it) is 0600.
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StoreError(.storeOpenFailed, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        Glibc.close(fd)
        db = try SQLiteDatabase(path: path, busyTimeoutMilliseconds: Self.busyTimeoutMilliseconds)

        // Read before writing anything: a file that is not ours, or is newer, stays as it is.
        let application = try db.integer("PRAGMA application_id")
        if application != 0, application != Self.applicationID {
            throw StoreError(.storeCorrupt, "\(path) is not an Interlude database (application_id \(application))")
        }
        let version = try db.integer("PRAGMA user_version")
        try Self.checkVersion(version, path: path)
        if application == 0, version == 0, try db.integer("SELECT count(*) FROM sqlite_schema") > 0 {
            throw StoreError(.storeCorrupt, "\(path) is not an Interlude database (it has tables but no schema version)")
        }

        // Journal mode is not transactional; WAL stays set in the file. If the file system cannot do
        // WAL (no shared memory), SQLite keeps a rollback journal: saves stay atomic and durable.
        _ = try db.text("PRAGMA journal_mode=WAL")
        try db.execute("PRAGMA synchronous=FULL")
        if version < Self.schemaVersion { try migrate() }
        let statements = try Statements(db)
        self.statements = statements
        dataVersion = try statements.dataVersion()
    }

    /// Closes the database. Later `load` and `save` calls throw `storeFailed`. Also done on deinit.
    public func close() {
        statements = nil
        differ = nil
        db.close()
    }

    /// The store's folder for an environment: `$XDG_STATE_HOME/interlude` if `XDG_STATE_HOME` is an
    /// absolute path, else `$HOME/.local/state/interlude` (the home from the password database if
    /// `HOME` is unset) (DESIGN "Config and state").
    ///
    /// - Parameter environment: variables to read; the process's environment by default.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        func trimmed(_ s: String) -> String {
            var s = s
            while s.count > 1, s.hasSuffix("/") { s.removeLast() }
            return s == "/" ? "" : s
        }
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return trimmed(state) + "/interlude" }
        var home = environment["HOME"] ?? ""
        if home.isEmpty, let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir { home = String(cString: dir) }
        return trimmed(home) + "/.local/state/interlude"
    }

    /// Reads the saved state: the last successful `save`, or an empty `NotificationState()` if the
    /// database is new. All tables are read in one transaction (one consistent snapshot).
    ///
    /// - Throws: `StoreError`: `storeCorrupt` (damaged file, or a row whose JSON does not decode),
    ///   `storeIOError`, `storeBusy`, `storeFailed` (closed).
    public func load() throws -> NotificationState {
        try loadWithSeqs().state
    }

    /// `load()`, with the `seq` of every list item; remembers both for the next save.
    func loadWithSeqs() throws -> (state: NotificationState, seqs: RowLayout) {
        let rows = try readRows()
        var state = NotificationState()
        func decode<T: Decodable>(_ type: T.Type, _ json: String, _ place: String) throws -> T {
            do { return try decoder.decode(T.self, from: Data(json.utf8)) } catch {
                throw StoreError(.storeCorrupt, "\(path): \(place) does not decode: \(error)")
            }
        }
        for (app, json) in rows.apps { state.apps[app] = try decode(NotificationAppRecord.self, json, "app \(app)") }
        state.pending = try rows.pending.map { try decode(PendingNotification.self, $0.json, "pending seq \($0.seq)") }
        state.delivered = try rows.delivered.map { try decode(DeliveredNotification.self, $0.json, "delivered seq \($0.seq)") }
        state.decisionLog = try rows.decisionLog.map { try decode(NotificationDecisionRecord.self, $0.json, "decision_log seq \($0.seq)") }
        state.owedReceipts = try rows.owedReceipts.map { try decode(OwedReceipt.self, $0.json, "owed_receipt seq \($0.seq)") }
        func meta<T: Decodable>(_ key: MetaKey, _ type: T.Type) throws -> T? {
            try rows.meta[key.rawValue].map { try decode(T.self, $0, "meta \(key.rawValue)") }
        }
        state.clock = try meta(.clock, NotificationTime.self)
        if let v = try meta(.focus, NotificationFocusState.self) { state.focus = v }
        if let v = try meta(.ringerSilent, Bool.self) { state.ringerSilent = v }
        if let v = try meta(.callActive, Bool.self) { state.callActive = v }
        if let v = try meta(.history, NotificationAlertHistory.self) { state.history = v }
        if let v = try meta(.summaryQueue, [HeldNotification].self) { state.summaryQueue = v }
        if let v = try meta(.coalesced, [HeldNotification].self) { state.coalesced = v }
        if let v = try meta(.remoteMessages, [String].self) { state.remoteMessages = v }
        let seqs = RowLayout(pending: rows.pending.map(\.seq), delivered: rows.delivered.map(\.seq),
                            decisionLog: rows.decisionLog.map(\.seq), owedReceipts: rows.owedReceipts.map(\.seq),
                            meta: Set(rows.meta.keys.compactMap(MetaKey.init(rawValue:))))
        differ = NotificationRowDiffer(state: state, seqs: seqs)
        return (state, seqs)
    }

    /// Saves `state` in one transaction (N15): after a crash at any moment, `load` returns either
    /// the state before this call or `state`, never a mix. When it returns, the state is on disk
    /// (`synchronous=FULL`). Only rows whose value changed since the last save or load are written,
    /// and rows that disappeared are deleted (see `lastSave`); if nothing changed, nothing is written.
    ///
    /// - Throws: `StoreError`: `storeBusy`, `storeIOError` (disk full, read-only, I/O), `storeCorrupt`,
    ///   `storeFailed` (closed, or a value that does not encode). The transaction is rolled back and
    ///   the database keeps the last saved state; a later save writes everything that differs from it.
    public func save(_ state: NotificationState) throws {
        guard let statements else { throw StoreError(.storeFailed, "\(path): the store is closed") }
        if try differ == nil || statements.dataVersion() != dataVersion { _ = try loadWithSeqs() }
        let changes = differ!.changes(to: state)
        try write([changes])
        lastSave = changes.stats
    }

    /// Writes `batch` in one transaction, in order (each element's rows are relative to the state
    /// after the previous one): the group commit. When it returns, all of it is on disk; when it
    /// throws, none of it is, and the store re-reads the database before its next `save`.
    ///
    /// - Throws: as `save`.
    func write(_ batch: [NotificationRowChanges]) throws {
        guard let statements else { throw StoreError(.storeFailed, "\(path): the store is closed") }
        guard batch.contains(where: { !$0.isEmpty }) else { return }
        do {
            // Encode first: a value that does not encode fails before the transaction begins.
            let rows = try batch.flatMap { try $0.rows.map(encode) }
            try statements.begin.run([])
            do {
                // In place: after a failure the rows and their slots are read again before the
                // next write (`differ` is nil), so a half-applied picture is never used.
                try slots.run(rows, statements)
                try statements.commit.run([])
            } catch {
                if db.inTransaction { try? db.execute("ROLLBACK") }
                throw error
            }
            // `dataVersion` stays: our own commits do not change it, and read again here it would
            // also take in another connection's commit made before this one, which the next
            // `save` must notice (it reads the rows again). One read transaction fewer per commit.
        } catch {
            differ = nil  // unknown until read again
            throw error
        }
    }

    /// A row operation with its value encoded.
    enum EncodedRow {
        case upsertApp(String, String)
        case deleteApp(String)
        case upsertMeta(String, String)
        case deleteMeta(String)
        case insert(ListTableName, Int64, String, String, String)
        case update(ListTableName, Int64, String, String, String)
        case delete(ListTableName, Int64)
    }

    private func encode(_ row: RowChange) throws -> EncodedRow {
        switch row {
        case let .upsertApp(app, record, _): return .upsertApp(app, try encode(record, "app \(app)"))
        case let .deleteApp(app): return .deleteApp(app)
        case let .upsertMeta(key, value, _):
            let text = switch value {
            case let .clock(v): try encode(v, key.rawValue)
            case let .focus(v): try encode(v, key.rawValue)
            case let .flag(v): try encode(v, key.rawValue)
            case let .history(v): try encode(v, key.rawValue)
            case let .held(v): try encode(v, key.rawValue)
            case let .strings(v): try encode(v, key.rawValue)
            }
            return .upsertMeta(key.rawValue, text)
        case let .deleteMeta(key): return .deleteMeta(key.rawValue)
        case let .insert(table, seq, app, identifier, value): return .insert(table, seq, app, identifier, try encode(value))
        case let .update(table, seq, app, identifier, value): return .update(table, seq, app, identifier, try encode(value))
        case let .delete(table, seq): return .delete(table, seq)
        }
    }

    private func encode(_ value: ListValue) throws -> String {
        switch value {
        case let .pending(v): try encode(v, "a pending notification")
        case let .delivered(v): try encode(v, "a delivered notification")
        case let .decision(v): try encode(v, "a decision record")
        case let .receipt(v): try encode(v, "an owed receipt")
        }
    }

    // MARK: Internals

    /// Rows as read, as text.
    struct Rows: Equatable {
        var apps: [String: String] = [:]
        var meta: [String: String] = [:]
        var pending: [ListRow] = []
        var delivered: [ListRow] = []
        var decisionLog: [ListRow] = []
        var owedReceipts: [ListRow] = []
    }

    /// Keys of the `meta` table, one per part of the state not kept in a table of its own.
    enum MetaKey: String, CaseIterable {
        case clock, focus, ringerSilent, callActive, history, summaryQueue, coalesced
        /// Issue 11: the remote message ids seen last, saved in the transaction of their decision.
        case remoteMessages
    }

    private static func checkVersion(_ version: Int64, path: String) throws {
        if version > schemaVersion {
            throw StoreError(.storeSchemaTooNew,
                             "\(path) has schema version \(version); this Interlude knows versions up to \(schemaVersion)")
        }
    }

    /// Applies the migrations the file lacks, in one transaction.
    private func migrate() throws {
        try db.execute("BEGIN IMMEDIATE")
        do {
            let version = try db.integer("PRAGMA user_version")
            try Self.checkVersion(version, path: path)
            if version < Self.schemaVersion {
                for step in Self.migrations[Int(version)...] { try db.execute(step) }
                try db.execute("PRAGMA user_version = \(Self.schemaVersion); PRAGMA application_id = \(Self.applicationID)")
            }
            try db.execute("COMMIT")
        } catch {
            if db.inTransaction { try? db.execute("ROLLBACK") }
            throw error
        }
    }

    /// A row's JSON: the protocol's writer (``WireCoding/encode(_:)``, the same text as `encoder`,
    /// faster: issue 9), or `encoder` for a value with a non-finite number (written as a string).
    private func encode<T: Encodable>(_ value: T, _ place: String) throws -> String {
        if let data = try? WireCoding.encode(value) { return String(decoding: data, as: UTF8.self) }
        do { return String(decoding: try encoder.encode(value), as: UTF8.self) } catch {
            throw StoreError(.storeFailed, "\(path): \(place) does not encode: \(error)")
        }
    }

    /// Every row, in one read transaction.
    private func readRows() throws -> Rows {
        guard let statements else { throw StoreError(.storeFailed, "\(path): the store is closed") }
        try db.execute("BEGIN")
        do {
            var rows = Rows()
            rows.apps = try statements.app.readAll()
            rows.meta = try statements.meta.readAll()
            var slots = ListSlots()
            (rows.pending, slots.tables[.pending]) = try statements.pending.readAll()
            (rows.delivered, slots.tables[.delivered]) = try statements.delivered.readAll()
            (rows.decisionLog, slots.tables[.decisionLog]) = try statements.decisionLog.readAll()
            (rows.owedReceipts, slots.tables[.owedReceipts]) = try statements.owedReceipts.readAll()
            try db.execute("COMMIT")
            self.slots = slots
            dataVersion = try statements.dataVersion()
            return rows
        } catch {
            if db.inTransaction { try? db.execute("ROLLBACK") }
            throw error
        }
    }

    /// Rows inserted, updated or deleted through this store's connection since it opened
    /// (`sqlite3_total_changes64`); tests use it to check `lastSave`.
    var totalChanges: Int64 { db.totalChanges }

    /// The store's connection, for tests that check its settings.
    var connection: SQLiteDatabase { db }

    /// The prepared statements of every table.
    private struct Statements {
        let app: KeyedTable
        let meta: KeyedTable
        let pending: ListTable
        let delivered: ListTable
        let decisionLog: ListTable
        let owedReceipts: ListTable
        let dataVersionQuery: SQLiteStatement
        /// A write transaction's ends, compiled once: `sqlite3_exec` compiled each from its text
        /// at every commit (issue 9).
        let begin, commit: SQLiteStatement

        init(_ db: SQLiteDatabase) throws {
            app = try KeyedTable(db, table: "app", key: "app_id")
            meta = try KeyedTable(db, table: "meta", key: "key")
            pending = try ListTable(db, table: "pending")
            delivered = try ListTable(db, table: "delivered")
            decisionLog = try ListTable(db, table: "decision_log")
            owedReceipts = try ListTable(db, table: "owed_receipt")
            dataVersionQuery = try db.prepare("PRAGMA data_version")
            begin = try db.prepare("BEGIN IMMEDIATE")
            commit = try db.prepare("COMMIT")
        }

        /// Runs one row operation of the `app` or `meta` table (list rows go through ``ListSlots``).
        func runKeyed(_ row: EncodedRow) throws {
            switch row {
            case let .upsertApp(key, json): try app.upsert.run([.text(key), .text(json)])
            case let .deleteApp(key): try app.delete.run([.text(key)])
            case let .upsertMeta(key, json): try meta.upsert.run([.text(key), .text(json)])
            case let .deleteMeta(key): try meta.delete.run([.text(key)])
            case .insert, .update, .delete: throw StoreError(.storeFailed, "a list row must be written through its slots")
            }
        }

        func list(_ t: ListTableName) -> ListTable {
            switch t {
            case .pending: pending
            case .delivered: delivered
            case .decisionLog: decisionLog
            case .owedReceipts: owedReceipts
            }
        }

        /// `PRAGMA data_version`: changes when another connection commits.
        func dataVersion() throws -> Int64 {
            var version: Int64 = 0
            try dataVersionQuery.forEachRow { version = $0.int64(0) }
            return version
        }
    }

    /// `app` or `meta`: one JSON value per key.
    private struct KeyedTable {
        let select, upsert, delete: SQLiteStatement

        init(_ db: SQLiteDatabase, table: String, key: String) throws {
            select = try db.prepare("SELECT \(key), json FROM \(table)")
            upsert = try db.prepare(
                "INSERT INTO \(table)(\(key), json) VALUES (?1, ?2) ON CONFLICT(\(key)) DO UPDATE SET json = excluded.json")
            delete = try db.prepare("DELETE FROM \(table) WHERE \(key) = ?1")
        }

        func readAll() throws -> [String: String] {
            var out: [String: String] = [:]
            try select.forEachRow { out[$0.text(0)] = $0.text(1) }
            return out
        }

    }

    /// `pending`, `delivered` or `decision_log`: rows in slots, ordered by `seq`.
    private struct ListTable {
        let select, insert, rewrite, delete: SQLiteStatement

        init(_ db: SQLiteDatabase, table: String) throws {
            select = try db.prepare("SELECT slot, seq, app_id, identifier, json FROM \(table) ORDER BY seq")
            insert = try db.prepare("INSERT INTO \(table)(slot, seq, app_id, identifier, json) VALUES (?1, ?2, ?3, ?4, ?5)")
            rewrite = try db.prepare("UPDATE \(table) SET seq = ?2, app_id = ?3, identifier = ?4, json = ?5 WHERE slot = ?1")
            delete = try db.prepare("DELETE FROM \(table) WHERE slot = ?1")
        }

        /// Every row in list order, and where each lives.
        func readAll() throws -> ([ListRow], ListSlots.Table) {
            var out: [ListRow] = []
            var slots = ListSlots.Table()
            try select.forEachRow {
                let slot = $0.int64(0), seq = $0.int64(1)
                slots.slotOf[seq] = slot
                slots.nextSlot = max(slots.nextSlot, slot + 1)
                out.append(ListRow(seq: seq, app: $0.text(2), identifier: $0.text(3), json: $0.text(4)))
            }
            return (out, slots)
        }
    }

    /// Where each list row lives (its slot, by `seq`), and how a transaction's list operations
    /// become row writes: a removed row's slot is taken by the next row added to the same table in
    /// the transaction (one row rewritten in place); slots nobody took are deleted at the end.
    private struct ListSlots {
        struct Table {
            /// The slot of each `seq` on disk.
            var slotOf: [Int64: Int64] = [:]
            /// Above every slot in use.
            var nextSlot: Int64 = 1
            /// Slots of rows removed in this transaction, not yet taken or deleted.
            var freed: [Int64] = []
        }
        /// Each list table's. A dictionary's `subscript(_:default:)` changes a table in place
        /// (a get/set subscript over three properties copied a table's whole map at every row).
        var tables: [ListTableName: Table] = [:]

        subscript(_ t: ListTableName) -> Table {
            get { tables[t, default: Table()] }
            _modify { yield &tables[t, default: Table()] }
        }

        /// Writes `rows`, in order, inside the caller's transaction.
        /// - Throws: `StoreError` `storeFailed` for an update of a row that is not there (the
        ///   store's picture of the file is wrong: it is read again before the next save), or what
        ///   SQLite throws.
        mutating func run(_ rows: [EncodedRow], _ statements: Statements) throws {
            for row in rows {
                switch row {
                case let .insert(t, seq, app, identifier, json):
                    let table = statements.list(t)
                    if let slot = self[t].freed.popLast() {
                        try table.rewrite.run([.integer(slot), .integer(seq), .text(app), .text(identifier), .text(json)])
                        self[t].slotOf[seq] = slot
                    } else {
                        let slot = self[t].nextSlot
                        self[t].nextSlot += 1
                        try table.insert.run([.integer(slot), .integer(seq), .text(app), .text(identifier), .text(json)])
                        self[t].slotOf[seq] = slot
                    }
                case let .update(t, seq, app, identifier, json):
                    guard let slot = self[t].slotOf[seq] else {
                        throw StoreError(.storeFailed, "no \(t) row numbered \(seq) to update")
                    }
                    try statements.list(t).rewrite.run([.integer(slot), .integer(seq), .text(app), .text(identifier), .text(json)])
                case let .delete(t, seq):
                    if let slot = self[t].slotOf.removeValue(forKey: seq) { self[t].freed.append(slot) }
                default:
                    try statements.runKeyed(row)
                }
            }
            for t in tables.keys where !tables[t]!.freed.isEmpty {
                for slot in tables[t]!.freed { try statements.list(t).delete.run([.integer(slot)]) }
                tables[t]!.freed = []
            }
        }
    }
}

/// A row of an ordered table (`pending`, `delivered`, `decision_log`) as read: its position key
/// `seq` (ascending = list order; gaps allowed), the app and identifier it is about, and its JSON.
struct ListRow: Equatable, Sendable {
    var seq: Int64
    var app: String
    var identifier: String
    var json: String
}

/// What one `NotificationStore.save` wrote, in rows. An item removed and another added to the same
/// list in one save count as one deleted and one inserted, and are one row rewritten in place on
/// disk (the list tables' slots).
public struct StoreSaveStats: Sendable, Equatable {
    /// Rows added (a new app, notification, log record or meta key; also a row moved to a new place).
    public var inserted = 0
    /// Rows whose JSON was rewritten in place.
    public var updated = 0
    /// Rows removed (gone from the state, or moved to a new place).
    public var deleted = 0

    /// Makes stats; all zero by default.
    public init(inserted: Int = 0, updated: Int = 0, deleted: Int = 0) {
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
    }

    /// All rows written: inserted + updated + deleted.
    public var rowsWritten: Int { inserted + updated + deleted }
}
