import Foundation
import InterludeEngine
import InterludePolicy
import InterludeStore

/// The engine's store port on the SQLite adapter (N15). The adapter is single-owner; the lock
/// makes it safe to hand to the engine.
final class SQLiteNotificationStore: NotificationStoring, @unchecked Sendable {
    private let lock = NSLock()
    private let store: NotificationStore

    /// Opens (or creates) `DIR/interlude.sqlite3`.
    /// - Throws: `StoreError` (`storeCorrupt`, `storeSchemaTooNew`, `storeOpenFailed`, …).
    init(directory: String) throws { store = try NotificationStore(directory: directory) }

    func load() throws -> NotificationState { try lock.withLock { try store.load() } }
    func save(_ state: NotificationState) throws { try lock.withLock { try store.save(state) } }
}
