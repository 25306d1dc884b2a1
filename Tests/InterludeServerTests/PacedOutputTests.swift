import Foundation
import Synchronization
import Testing
import InterludeClient
import InterludeEngine
import InterludePolicy
import InterludeTestSupport
import InterludeWire
@testable import InterludeServer
#if canImport(Glibc)
import Glibc
#endif

/// A removal of many (N11's center limits, `notification.remove` with `all`, `interlude center
/// clear`) told to clients that read: its `notificationRemoved` parts and the remove's reply are
/// paced (`Connection.send(paced:_:)`), so together they may pass `server.maxOutputBytes` and wait
/// for the peer to read, up to `maxPacedBytes` (8 × `maxOutputBytes`) or the engine's
/// `removalAllowance` (a whole removal at the center's limits) when larger. Before, the parts were
/// all counted at once, and 100 identifiers of 1 KiB at `maxOutputBytes` 64 KiB closed the app's
/// connection, every watcher's and the remove's caller (a stranger's find); with 8 ×
/// `maxOutputBytes` alone, a whole default center of 1,000 such identifiers still did (the next
/// stranger's find).
@Suite(.serialized) struct PacedOutputTests {
    /// Collects the identifiers of `c`'s `notificationRemoved` events until `count` have come (or
    /// `timeout` seconds pass).
    static func removed(_ c: InterludeClient, count: Int, timeout: Double = 20) async -> [String] {
        await withTaskGroup(of: [String]?.self) { g in
            g.addTask {
                var ids: [String] = []
                for await e in c.events where e.event == NotificationEventName.removed {
                    if case let .array(list)? = e.data["identifiers"] { ids += list.compactMap(\.stringValue) }
                    if ids.count >= count { return ids }
                }
                return ids
            }
            g.addTask { try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9)); return nil }
            let first = await g.next()!
            g.cancelAll()
            return first ?? []
        }
    }

    /// A daemon at `maxOutputBytes` 64 KiB (the smallest) whose app `org.example.Chat` has delivered
    /// `count` notifications with identifiers of about 1 KB, oldest first; `before` runs first (a
    /// watcher that subscribes before the adds).
    static func chatWithLongIdentifiers(_ count: Int, before: (TestDaemon) async throws -> Void = { _ in }) async throws
        -> (daemon: TestDaemon, chat: InterludeClient, ids: [String]) {
        let d = try TestDaemon(maxOutputBytes: 64 * 1024, overlay:
            #"{"authorization": {"default": "grant"}, "bursts": {"maxDeliveredPerApp": 1000}}"#)
        try await before(d)
        let chat = try await InterludeClient.connect(socket: d.socket, app: "org.example.Chat")
        _ = try await chat.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]),
                                as: AuthorizationResult.self)
        let ids = (0..<count).map { "n\($0)-" + String(repeating: "x", count: 1000) }
        for id in ids {
            _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: id, title: "hi"), as: AddNotificationResult.self)
        }
        return (d, chat, ids)
    }

    /// `count` raw connections of the user's tool that say hello, subscribe, and then read nothing.
    static func watchersThatDoNotRead(_ d: TestDaemon, count: Int) throws -> [RawPeer] {
        var peers: [RawPeer] = []
        for _ in 0..<count {
            let p = try d.rawConnect()
            _ = p.readLine()  // the greeting
            p.send(#"{"id":1,"method":"hello","params":{"app":"\#(Engine.userToolApp)"}}"# + "\n")
            #expect(p.reply()?.error == nil)
            p.send(#"{"id":2,"method":"subscribe","params":{}}"# + "\n")
            #expect(p.reply()?.error == nil)
            peers.append(p)
        }
        return peers
    }

    @Test func aRemovalLargerThanTheOutputBoundReachesTheAppTheWatcherAndTheCaller_N11() async throws {
        let watcher = Mutex<InterludeClient?>(nil)
        // A whole default center (1,000) of identifiers of 1 KB: about 1 MB in the events and 1 MB
        // in the reply, 16 and 32 times 64 KiB, four times 8 × 64 KiB for the watcher.
        let (d, chat, ids) = try await Self.chatWithLongIdentifiers(1000) { d in
            let user = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
            try await user.subscribe()
            watcher.withLock { $0 = user }
        }
        defer { withExtendedLifetime(d) {} }  // the daemon lives to the end of the test
        let user = try #require(watcher.withLock { $0 })
        async let toChat = Self.removed(chat, count: ids.count)
        async let toUser = Self.removed(user, count: ids.count)
        let r = try await user.call(NotificationMethod.remove, RemoveNotificationsParams(app: "org.example.Chat", all: true),
                                    as: RemoveNotificationsResult.self)
        #expect(r.removed == ids.sorted(), "the caller's reply lists every identifier removed")
        let (chatSaw, userSaw) = await (toChat, toUser)
        #expect(chatSaw == ids, "the app is told of each, oldest first: \(chatSaw.count) of \(ids.count)")
        #expect(userSaw == ids, "the watcher too: \(userSaw.count) of \(ids.count)")
        #expect(try await chat.status().version == "test", "the app's connection is open")
        #expect(try await user.status().version == "test", "the watcher's connection is open")
    }

    /// Peers that subscribe and never read hold a removal's parts together, not a copy each: every
    /// connection writes an event's line as the engine encoded it once (`EngineEvent.line`). Each
    /// encoded its own before, and ten such peers made the daemon hold ten removals (168 MB in a
    /// stranger's probe at the defaults; at the largest center limits, 825 MB each).
    @Test func peersThatDoNotReadHoldOneCopyOfARemoval_N11() async throws {
        let (d, chat, ids) = try await Self.chatWithLongIdentifiers(1000)
        defer { withExtendedLifetime(d) {} }
        let peers = try Self.watchersThatDoNotRead(d, count: 4)
        let r = try await chat.call(NotificationMethod.remove, RemoveNotificationsParams(all: true), as: RemoveNotificationsResult.self)
        #expect(r.removed.count == ids.count)
        // The parts were sent before the reply: past what the sockets and the output took, they
        // wait in each watcher's paced lane.
        let lanes = d.server.pacedLinesWaiting.filter { !$0.isEmpty }
        #expect(lanes.count == peers.count, "every watcher holds parts: \(lanes.map(\.count))")
        let address = { (line: Data) in line.withUnsafeBytes { Int(bitPattern: $0.baseAddress) } }
        let distinct = Set(lanes.flatMap { $0.map(address) })
        let longest = lanes.map(\.count).max() ?? 0
        #expect(longest > 10 && distinct.count == longest,
                "\(distinct.count) distinct buffers for lanes of \(lanes.map(\.count)) lines: one copy of each part")
        withExtendedLifetime(peers) {}
    }

    /// Peers that subscribe and never read hold the events waiting for them together: a
    /// connection's output keeps each line as the buffer it was encoded in (`OutputQueue`), and an
    /// event's line is encoded once for all (`EngineEvent.line`). Each peer copied every line into
    /// a buffer of its own before, up to `server.maxOutputBytes` each.
    @Test func peersThatDoNotReadHoldTheEventsWaitingTogether() async throws {
        let d = try TestDaemon(overlay: #"{"authorization": {"default": "grant"}, "bursts": {"maxDeliveredPerApp": 1000}}"#)
        defer { withExtendedLifetime(d) {} }
        let peers = try Self.watchersThatDoNotRead(d, count: 4)
        let chat = try await InterludeClient.connect(socket: d.socket, app: "org.example.Chat")
        _ = try await chat.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]),
                                as: AuthorizationResult.self)
        // About 1.2 KB an event: past what the sockets take (a few hundred KB), the rest waits in
        // each peer's output, under the 1 MiB bound.
        for i in 0..<500 {
            _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "n\(i)-" + String(repeating: "x", count: 1000), title: "hi"),
                                    as: AddNotificationResult.self)
        }
        let lanes = d.server.outputLinesWaiting.filter { $0.count > 1 }
        #expect(lanes.count == peers.count, "every peer has lines waiting: \(lanes.map(\.count))")
        let address = { (line: Data) in line.withUnsafeBytes { Int(bitPattern: $0.baseAddress) } }
        let distinct = Set(lanes.flatMap { $0.map(address) })
        let longest = lanes.map(\.count).max() ?? 0
        #expect(longest > 10 && distinct.count == longest,
                "\(distinct.count) distinct buffers for outputs of \(lanes.map(\.count)) lines: one copy of each event")
        #expect(try await chat.status().version == "test", "the app's connection is open")
        withExtendedLifetime(peers) {}
    }

    /// A page of the center follows `maxOutputBytes` (a quarter of it when below 1 MiB: `Engine.listPageBytes`):
    /// at the smallest (64 KiB), `interlude center` over 100 notifications with identifiers of
    /// 1 KB got a 118 KB page and was closed as a client that does not read (a stranger's find).
    @Test func aPageOfTheCenterFollowsTheOutputBound() async throws {
        let (d, _, ids) = try await Self.chatWithLongIdentifiers(100)
        let user = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        let page = try await user.call(NotificationMethod.delivered, ListNotificationsParams(all: true, limit: 100), as: NotificationListResult.self)
        let size = try WireCoding.encode(page).count
        #expect(page.more && page.notifications.count >= 5 && size <= 16 * 1024 + 4096, "\(page.notifications.count) entries, \(size) bytes")
        #expect(try await user.wholeCenter(all: true).notifications.map(\.identifier) == ids, "every page read, in order")
        #expect(try await user.status().version == "test", "the connection is open")
    }

    /// A peer that does not read is still closed: paced lines wait for it up to `maxPacedBytes`.
    @Test func pacedLinesForAPeerThatDoesNotReadAreBoundedByMaxPacedBytes() async throws {
        let limits = ConnectionLimits(maxOutputBytes: 64 * 1024)
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[1]) }
        let logged = StoppingTests.Lines()
        let connection = Connection(fd: fds[0], pid: getpid(), limits: limits, log: logged.append)
        connection.start()
        defer { connection.close() }
        let part = String(repeating: "p", count: 30_000)
        // 30 KB each: the socket's buffers, 64 KiB of output, then 512 KiB of paced lines.
        for i in 0..<40 {
            connection.send(paced: true) { .event(WireEvent(event: "part", data: .object(["i": .number(Double(i)), "p": .string(part)]), time: 0)) }
        }
        let lines = ConnectionOrderTests.readLines(fds[1], count: 40)
        #expect(lines.count < 40, "the connection was closed before the last part: \(lines.count) came")
        #expect(logged.all.contains { $0.contains("does not read") && $0.contains("paced lines") }, "\(logged.all)")
    }

    /// Paced lines keep their order with the lines sent around them, and a line over
    /// `maxOutputBytes` sent paced goes out alone once the output is empty (a whole center's
    /// `notification.remove` reply).
    @Test func pacedLinesKeepTheOrderAndALineOverTheBoundGoesOutAlone() async throws {
        try await ConnectionOrderTests.withConnection(limits: ConnectionLimits(maxOutputBytes: 64 * 1024)) { connection, peer in
            let part = String(repeating: "p", count: 30_000)
            var sent = 0
            for round in 0..<4 {
                connection.send(.event(WireEvent(event: "plain", data: .number(Double(sent)), time: 0))); sent += 1
                for _ in 0..<3 {
                    let i = sent
                    connection.send(paced: true) { .event(WireEvent(event: "part", data: .object(["i": .number(Double(i)), "p": .string(part)]), time: 0)) }
                    sent += 1
                }
                if round == 2 {
                    let big = Data(#"{"i":\#(sent),"removed":"\#(String(repeating: "r", count: 100_000))"}"#.utf8)
                    connection.reply(id: .number(Double(sent)), result: big, paced: true); sent += 1
                }
                connection.reply(.reply(WireReply(id: .number(Double(sent)), result: .object([:])))); sent += 1
            }
            let lines = ConnectionOrderTests.readLines(peer, count: sent)
            #expect(lines.count == sent)
            var order: [Int] = []
            for line in lines {
                guard case let .object(o)? = try? JSONValue.parse(Data(line.utf8)) else { continue }
                if case let .number(n)? = o["data"] { order.append(Int(n)) }
                if case let .object(d)? = o["data"], case let .number(n)? = d["i"] { order.append(Int(n)) }
                if o["event"] == nil, case let .number(n)? = o["id"] { order.append(Int(n)) }
            }
            #expect(order == Array(0..<sent))
        }
    }
}
