/// An error of the notification store (N15): a stable code to act on, and a message for people
/// that includes SQLite's own text when SQLite reported the failure.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable error codes; callers branch on these, never on `message`.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// The folder or the database file could not be created or opened (permissions, a file
        /// where the folder should be, no space).
        case storeOpenFailed
        /// The file is not a database, is damaged, is another program's database, or holds rows
        /// that do not decode. Nothing was changed; move the file away to start over.
        case storeCorrupt
        /// Another daemon holds the state folder (``StateFolderLock``): one daemon per folder.
        case storeInUse
        /// Another connection held the database longer than the busy timeout (2 s).
        case storeBusy
        /// The database was written by a newer Interlude (its schema version is higher than this
        /// build knows); it is left untouched.
        case storeSchemaTooNew
        /// Reading or writing failed (I/O error, disk full, read-only file system). The state on
        /// disk is the last one saved successfully.
        case storeIOError
        /// Anything else SQLite reported (a bug in the store's SQL, misuse); the message says what.
        case storeFailed
    }

    /// The stable code.
    public var code: Code
    /// What failed, for logs and people, with SQLite's message where there is one.
    public var message: String
    /// SQLite's extended result code, if SQLite reported the failure.
    public var sqliteCode: Int32?

    /// Makes an error.
    public init(_ code: Code, _ message: String, sqliteCode: Int32? = nil) {
        self.code = code
        self.message = message
        self.sqliteCode = sqliteCode
    }

    /// `message [code]`: the code ends the line, as the other errors' (config, MQTT, the bus) do.
    public var description: String { "\(message) [\(code.rawValue)]" }
}
