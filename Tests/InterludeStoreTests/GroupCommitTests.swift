import Foundation
import InterludeEngine
import InterludePolicy
@testable import InterludeStore
import Testing

// N15 with the group commit (issue 9): states submitted while a commit is in flight go into the
// next transaction together; each is reported durable only after its transaction committed, and
// the file then holds the last state submitted.
@Suite struct GroupCommitTests {
    /// `count` states, each one more delivered notification than the one before.
    static func states(_ count: Int) -> [NotificationState] {
        var d = richPolicyState()
        return (0..<count).map { k in
            d.post("g\(k)", from: Apps.chat, .init(title: "message \(k)"), after: 1)
            return d.state
        }
    }

    @Test func N15_statesSubmittedTogetherShareCommitsAndAreDurableWhenReported() async throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try SQLiteNotificationStore(directory: tmp.storeDirectory)
        #expect(try store.load() == NotificationState())
        let states = Self.states(60)
        let commits = states.map { store.submit($0) }  // all at once, as 60 clients would
        for (k, c) in commits.enumerated() {
            let error = await c.outcome()
            #expect(error == nil, "state \(k): \(String(describing: error))")
        }
        let counts = store.commitCounts
        #expect(counts.changes == 60)
        #expect(counts.commits < 60, "no two states shared a commit")  // the first commit is in flight while the rest queue
        // Another connection reads what was reported durable.
        let other = try NotificationStore(directory: tmp.storeDirectory)
        #expect(try other.load() == states.last)
    }

    @Test func N15_aSubmitBeforeLoadFailsAtOnce() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try SQLiteNotificationStore(directory: tmp.storeDirectory)
        let commit = store.submit(NotificationState())
        #expect(commit.known != nil && commit.known! != nil)
        #expect(throws: StoreError.self) { try store.save(NotificationState()) }
    }

    @Test func N15_saveWaitsForItsCommit() throws {
        let tmp = TemporaryFolder()
        defer { tmp.remove() }
        let store = try SQLiteNotificationStore(directory: tmp.storeDirectory)
        _ = try store.load()
        let states = Self.states(5)
        for s in states.dropLast() { _ = store.submit(s) }
        try store.save(states.last!)
        #expect(try NotificationStore(directory: tmp.storeDirectory).load() == states.last)
    }
}
