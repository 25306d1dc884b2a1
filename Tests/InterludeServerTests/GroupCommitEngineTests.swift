import Foundation
import InterludeClient
import InterludeConfig
import InterludeEngine
import InterludePolicy
import InterludeServer
@testable import InterludeStore
import InterludeTestSupport
import InterludeWire
import Synchronization
import Testing

/// A store with a group commit the test drives: while held, every submit waits; `release` makes
/// all waiting commits durable or fails them all (as a failed transaction fails everything queued
/// behind it), and after a failure `recoverAfterFailedCommit` hands back the last durable state once.
final class GatedNotificationStore: NotificationStoring, Sendable {
    struct Shared {
        var holding = false
        var durable = NotificationState()
        var submitted = NotificationState()
        /// Held submits by id.
        var outcomes: [Int: Outcome] = [:]
        var waiting: [Int: @Sendable ((any Error)?) -> Void] = [:]
        var nextID = 0
        var broken = false
    }
    /// Under NSLock, not `Synchronization.Mutex`: ThreadSanitizer cannot see Mutex's futex on
    /// Linux and reports its hand-overs as races (the TSan pass of Scripts/test).
    let shared = LockedBox(Shared())

    func load() throws -> NotificationState { shared.withLock { $0.durable } }
    func save(_ state: NotificationState) throws { shared.withLock { $0.durable = state; $0.submitted = state } }

    func submit(_ state: NotificationState) -> NotificationCommit {
        let id: Int?? = shared.withLock { s in
            if s.broken { return .some(nil) }
            s.submitted = state
            guard s.holding else {
                s.durable = state
                return nil
            }
            s.nextID += 1
            s.outcomes[s.nextID] = .held
            return .some(s.nextID)
        }
        switch id {
        case nil: return .durable
        case .some(nil): return .failed(StoreError.full)
        case let .some(id?): return NotificationCommit(tracker: Held(store: self, id: id))
        }
    }

    /// A held submit's commit: settled when the test releases the hold.
    struct Held: NotificationCommitTracking {
        let store: GatedNotificationStore
        let id: Int
        func settledNow() -> (any Error)?? { store.shared.withLock { outcome(in: $0) } }
        func whenSettled(_ body: @escaping @Sendable ((any Error)?) -> Void) {
            let known: (any Error)?? = store.shared.withLock { s in
                if let known = outcome(in: s) { return known }
                s.waiting[id] = body
                return nil
            }
            if let known { body(known) }
        }
        private func outcome(in s: Shared) -> (any Error)?? {
            switch s.outcomes[id] {
            case .durable?: .some(nil)
            case .failed?: .some(StoreError.full)
            default: nil
            }
        }
    }

    func recoverAfterFailedCommit() -> NotificationState? {
        shared.withLock { s in
            guard s.broken else { return nil }
            s.broken = false
            s.submitted = s.durable
            return s.durable
        }
    }

    /// Submits held now.
    var heldCount: Int { shared.withLock { s in s.outcomes.values.filter { $0 == .held }.count } }
    /// The identifiers in the center of the last state submitted (held or not).
    var submittedIdentifiers: Set<String> { shared.withLock { Set($0.submitted.delivered.map(\.request.identifier)) } }
    func hold() { shared.withLock { $0.holding = true } }

    /// Ends the hold: the held commits become durable, or all fail.
    func release(failing: Bool) {
        let waiting: [@Sendable ((any Error)?) -> Void] = shared.withLock { s in
            s.holding = false
            if failing { s.broken = true } else { s.durable = s.submitted }
            for (id, o) in s.outcomes where o == .held { s.outcomes[id] = failing ? .failed : .durable }
            defer { s.waiting = [:] }
            return Array(s.waiting.values)
        }
        for body in waiting { body(failing ? StoreError.full : nil) }
    }

    enum StoreError: Error { case full }
    enum Outcome { case held, durable, failed }
}

/// The engine with a group-committing store (N15, issue 9): requests waiting for one commit are
/// answered when it is durable, and all fail together when it fails; the engine then carries on
/// from the durable state, with nothing of the failed requests in it.
@Suite struct GroupCommitEngineTests {
    static let grant = #"{"authorization": {"default": "grant"}}"#

    func daemon(_ store: GatedNotificationStore) throws -> (Engine, SocketServer, String) {
        let dir = NSTemporaryDirectory() + "interlude-gc-\(UUID().uuidString.prefix(8))"
        let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(Self.grant)))
        let engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: FakeSoundPlayer(), store: store, version: "test")
        let server = SocketServer(path: dir + "/socket", engine: engine, maxOutputBytes: 1 << 20, log: { _ in })
        try server.start()
        return (engine, server, dir)
    }

    func apps(_ socket: String, _ n: Int) async throws -> [InterludeClient] {
        try await connectAuthorizedApps(socket: socket, (0..<n).map { "org.example.App\($0)" })
    }

    /// Sends one `notification.add` from each client at once; returns the outcomes (id or error code).
    func addFromEach(_ clients: [InterludeClient], prefix: String, store: GatedNotificationStore,
                     release failing: Bool) async throws -> [String] {
        try await withThrowingTaskGroup(of: String.self) { group in
            for (i, c) in clients.enumerated() {
                group.addTask {
                    do {
                        return try await c.call(NotificationMethod.add, AddNotificationParams(identifier: "\(prefix)\(i)", title: "t"),
                                                as: AddNotificationResult.self).identifier
                    } catch let e as WireError {
                        return e.code.rawValue
                    }
                }
            }
            let begin = Date()
            while store.heldCount < clients.count, Date().timeIntervalSince(begin) < 10 { try await Task.sleep(nanoseconds: 2_000_000) }
            #expect(store.heldCount == clients.count, "every request waits for the commit")
            store.release(failing: failing)
            var out: [String] = []
            for try await r in group { out.append(r) }
            return out.sorted()
        }
    }

    /// N15 with the real store: a commit that fails (another process holds the database's write
    /// lock past the busy timeout) fails its request with `storageFailed`, and the daemon carries
    /// on. The failure is reported on the store's committing thread, where the engine then takes
    /// the durable state back: that took the store's queue synchronously from itself and crashed
    /// the daemon (SIGILL; a stranger's find). With the engine's threads leading commits (as the
    /// daemon runs it) and without.
    @Test(arguments: [false, true]) func N15_aFailedCommitOfTheRealStoreFailsTheRequestAndTheDaemonCarriesOn(led: Bool) async throws {
        let dir = NSTemporaryDirectory() + "interlude-gc-real-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = try ConfigLoader.load(folders: [], overlay: ("test", try JSON5.parse(Self.grant)))
        let store = try SQLiteNotificationStore(directory: dir + "/state", leaders: led ? .shared : nil)
        let engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: FakeSoundPlayer(), store: store, version: "test")
        let server = SocketServer(path: dir + "/socket", engine: engine, maxOutputBytes: 1 << 20, log: { _ in })
        try server.start()
        defer { server.stop() }
        let chat = try await connectAuthorizedApps(socket: dir + "/socket", ["org.example.Chat"])[0]
        _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "before", title: "t"), as: AddNotificationResult.self)

        let other = try NotificationStore(directory: dir + "/state")
        try other.connection.execute("BEGIN EXCLUSIVE")  // held past the store's busy timeout
        do {
            _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "locked", title: "t"), as: AddNotificationResult.self)
            Issue.record("acknowledged without being saved")
        } catch let e as WireError {
            #expect(e.code == .storageFailed)
        }
        try other.connection.execute("ROLLBACK")
        other.close()

        // Still serving, from the durable state: the failed request is not in it.
        _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "after", title: "t"), as: AddNotificationResult.self)
        #expect(try NotificationStore(directory: dir + "/state").load().delivered.map(\.request.identifier) == ["before", "after"])
    }

    @Test func N15_requestsWaitingForOneCommitAreAnsweredWhenItIsDurable() async throws {
        let store = GatedNotificationStore()
        let (_, server, dir) = try daemon(store)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let clients = try await apps(dir + "/socket", 3)
        store.hold()
        #expect(try await addFromEach(clients, prefix: "ok", store: store, release: false) == ["ok0", "ok1", "ok2"])
        #expect(Set(store.shared.withLock { $0.durable }.delivered.map(\.request.identifier)) == ["ok0", "ok1", "ok2"])
    }

    @Test func N15_aFailedCommitFailsEveryRequestWaitingForItAndNothingOfThemStays() async throws {
        let store = GatedNotificationStore()
        let (_, server, dir) = try daemon(store)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let clients = try await apps(dir + "/socket", 3)
        store.hold()
        let outcomes = try await addFromEach(clients, prefix: "lost", store: store, release: true)
        #expect(outcomes == Array(repeating: WireErrorCode.storageFailed.rawValue, count: 3))
        let list = try await clients[0].call(NotificationMethod.delivered, ListNotificationsParams(), as: NotificationListResult.self)
        #expect(list.notifications.isEmpty, "nothing of a failed commit is in the center")
        _ = try await clients[0].call(NotificationMethod.add, AddNotificationParams(identifier: "kept", title: "t"), as: AddNotificationResult.self)
        #expect(store.shared.withLock { $0.durable }.delivered.map(\.request.identifier) == ["kept"])
    }

    static func array(_ v: JSONValue?) -> [JSONValue] { if case let .array(a)? = v { return a } else { return [] } }

    /// A raw connection that has said hello and been authorized, and a way to send `n` adds in
    /// one write: the server then finds them all read ahead at once, whatever the machine's load
    /// (sent by separate calls, they could arrive one by one and be committed one by one).
    func pipeliningPeer(_ socket: String) throws -> (peer: RawPeer, sendAdds: (_ prefix: String, _ n: Int) -> Void) {
        let p = try RawPeer(path: socket)
        guard case .greeting? = p.readLine() else { throw CocoaError(.fileReadUnknown) }
        p.send(#"{"id":1,"method":"hello","params":{"app":"org.example.App0"}}"# + "\n"
               + #"{"id":2,"method":"notification.requestAuthorization","params":{"options":["alert"]}}"# + "\n")
        guard p.reply()?.error == nil, p.reply()?.error == nil else { throw CocoaError(.fileReadUnknown) }
        return (p, { prefix, n in
            p.send((0..<n).map { #"{"id":\#(10 + $0),"method":"notification.add","params":{"identifier":"\#(prefix)\#($0)","title":"t"}}"# + "\n" }.joined())
        })
    }

    /// Issue 9: one connection's back-to-back `notification.add`s are decided without waiting for
    /// each other's commit, so they wait for one commit together (before, the server took the
    /// next request only after the previous reply: one held at a time), and are answered when it
    /// is durable; a request of another kind after them sees them all.
    @Test func N15_oneConnectionsPipelinedAddsShareACommit() async throws {
        let store = GatedNotificationStore()
        let (_, server, dir) = try daemon(store)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let (peer, sendAdds) = try pipeliningPeer(dir + "/socket")
        store.hold()
        sendAdds("p", 5)
        let begin = Date()
        let five = Set((0..<5).map { "p\($0)" })
        while !store.submittedIdentifiers.isSuperset(of: five), Date().timeIntervalSince(begin) < 5 { try await Task.sleep(nanoseconds: 2_000_000) }
        #expect(store.submittedIdentifiers.isSuperset(of: five), "the five requests of one connection are decided while the commit is held")
        // Read ahead together, they are one batch: one submit (at most one each before the batching).
        #expect((1...5).contains(store.heldCount))
        store.release(failing: false)
        let replies = (0..<5).compactMap { _ in peer.reply() }
        #expect(replies.map(\.id) == (10..<15).map { JSONValue.number(Double($0)) }, "answered in order")
        #expect(replies.allSatisfy { $0.error == nil }, "\(replies.compactMap(\.error))")
        peer.send(#"{"id":20,"method":"notification.delivered","params":{}}"# + "\n")
        let list = try #require(peer.reply()?.result)
        let ids = Set(Self.array(list["notifications"]).compactMap { $0["identifier"]?.stringValue })
        #expect(ids == Set((0..<5).map { "p\($0)" }))
    }

    /// Issue 9, N15: pipelined adds waiting for a commit that fails all fail, and nothing of them stays.
    @Test func N15_pipelinedAddsOfAFailedCommitAllFail() async throws {
        let store = GatedNotificationStore()
        let (_, server, dir) = try daemon(store)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let (peer, sendAdds) = try pipeliningPeer(dir + "/socket")
        store.hold()
        sendAdds("f", 4)
        let begin = Date()
        let four = Set((0..<4).map { "f\($0)" })
        while !store.submittedIdentifiers.isSuperset(of: four), Date().timeIntervalSince(begin) < 5 { try await Task.sleep(nanoseconds: 2_000_000) }
        #expect(store.submittedIdentifiers.isSuperset(of: four), "the four are decided while the commit is held")
        store.release(failing: true)
        let outcomes = (0..<4).map { _ in peer.reply()?.error?.code.rawValue ?? "no error" }
        #expect(outcomes == Array(repeating: WireErrorCode.storageFailed.rawValue, count: 4))
        peer.send(#"{"id":20,"method":"notification.delivered","params":{}}"# + "\n")
        let list = try #require(peer.reply()?.result)
        #expect(Self.array(list["notifications"]).isEmpty, "\(list)")
    }
}

/// A value under an NSLock (a pthread mutex, which ThreadSanitizer understands).
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
