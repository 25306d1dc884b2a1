// Every sqlite3_* call of Interlude is in this file: a connection, prepared statements, and the
// mapping of SQLite's result codes to `StoreError` codes. Not thread-safe: one owner at a time.
import CSQLite

/// SQLite's SQLITE_TRANSIENT (a C macro Swift does not import): SQLite copies bound text at once.
private var transient: sqlite3_destructor_type { unsafeBitCast(-1, to: sqlite3_destructor_type.self) }

/// An open SQLite database connection.
final class SQLiteDatabase {
    private var handle: OpaquePointer?
    /// The file's path, for messages.
    let path: String

    /// Opens (creating if missing) the database file at `path`, with extended result codes and a
    /// busy timeout of `busyTimeoutMilliseconds`. Throws `storeOpenFailed`. Nothing is read yet:
    /// a file that is not a database is only noticed by the first statement.
    init(path: String, busyTimeoutMilliseconds: Int32) throws {
        self.path = path
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
        guard rc == SQLITE_OK, let db else {
            let text = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(db)
            throw StoreError(.storeOpenFailed, "cannot open \(path): \(text)", sqliteCode: rc)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
    }

    deinit { close() }

    /// Closes the connection (statements not yet finalized are finalized when they go away).
    func close() {
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Runs one or more statements that return no rows of interest (DDL, PRAGMA, BEGIN, COMMIT).
    func execute(_ sql: String) throws {
        let db = try open()
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &error)
        let text = error.map { String(cString: $0) }
        sqlite3_free(error)
        if rc != SQLITE_OK { throw self.error(rc, text, doing: sql) }
    }

    /// Compiles one statement for repeated use.
    func prepare(_ sql: String) throws -> SQLiteStatement {
        let db = try open()
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw error(rc, nil, doing: sql) }
        return SQLiteStatement(statement, database: self, sql: sql)
    }

    /// The integer a one-row, one-column query returns (e.g. `PRAGMA user_version`).
    func integer(_ sql: String) throws -> Int64 {
        let s = try prepare(sql)
        guard try s.step() else { throw StoreError(.storeFailed, "\(sql) returned no row") }
        return s.int64(0)
    }

    /// The text a one-row, one-column query returns (e.g. `PRAGMA journal_mode=WAL`).
    func text(_ sql: String) throws -> String {
        let s = try prepare(sql)
        guard try s.step() else { throw StoreError(.storeFailed, "\(sql) returned no row") }
        return s.text(0)
    }

    /// Rows inserted, updated or deleted by this connection since it opened (sqlite3_total_changes64).
    var totalChanges: Int64 { handle.map { sqlite3_total_changes64($0) } ?? 0 }

    /// Whether a transaction is open (not in autocommit mode).
    var inTransaction: Bool { handle.map { sqlite3_get_autocommit($0) == 0 } ?? false }

    private func open() throws -> OpaquePointer {
        guard let handle else { throw StoreError(.storeFailed, "\(path): the database is closed") }
        return handle
    }

    /// A `StoreError` for result code `rc`, with SQLite's message (or `text` if given).
    func error(_ rc: Int32, _ text: String?, doing what: String) -> StoreError {
        let message = text ?? handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
        let code: StoreError.Code = switch rc & 0xff {
        case SQLITE_BUSY, SQLITE_LOCKED: .storeBusy
        case SQLITE_CORRUPT, SQLITE_NOTADB: .storeCorrupt
        case SQLITE_IOERR, SQLITE_FULL, SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_PROTOCOL, SQLITE_PERM: .storeIOError
        default: .storeFailed
        }
        let statement = what.count > 80 ? String(what.prefix(77)) + "..." : what
        return StoreError(code, "\(path): \(message) (SQLite code \(rc), in: \(statement))", sqliteCode: rc)
    }
}

/// A prepared statement: bind, step, read columns, reset.
final class SQLiteStatement {
    private let handle: OpaquePointer
    private let database: SQLiteDatabase
    private let sql: String

    fileprivate init(_ handle: OpaquePointer, database: SQLiteDatabase, sql: String) {
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    /// Resets the statement and binds `values` (String or Int64) to parameters 1, 2, ….
    func bind(_ values: [SQLiteValue]) throws {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (i, value) in values.enumerated() {
            let index = Int32(i + 1)
            let rc = switch value {
            case .text(let s): sqlite3_bind_text64(handle, index, s, sqlite3_uint64(s.utf8.count), transient, UInt8(SQLITE_UTF8))
            case .integer(let n): sqlite3_bind_int64(handle, index, n)
            }
            if rc != SQLITE_OK { throw database.error(rc, nil, doing: sql) }
        }
    }

    /// Steps once: true if a row is available, false when done.
    func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            sqlite3_reset(handle)
            throw database.error(rc, nil, doing: sql)
        }
    }

    /// Binds `values` and runs the statement to completion (INSERT, UPDATE, DELETE).
    func run(_ values: [SQLiteValue]) throws {
        try bind(values)
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Binds `values` and calls `row` for each result row.
    func forEachRow(_ values: [SQLiteValue] = [], _ row: (SQLiteStatement) throws -> Void) throws {
        try bind(values)
        defer { sqlite3_reset(handle) }
        while try step() { try row(self) }
    }

    /// Column `index` (from 0) of the current row as an integer.
    func int64(_ index: Int32) -> Int64 { sqlite3_column_int64(handle, index) }

    /// Column `index` (from 0) of the current row as text ("" for NULL; embedded NULs kept).
    func text(_ index: Int32) -> String {
        guard let p = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: p, count: count), as: UTF8.self)
    }
}

/// A value bound to a statement parameter.
enum SQLiteValue {
    case text(String)
    case integer(Int64)
}
