import Foundation
import Testing
@testable import InterludeServer
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// Pipelined `notification.add` replies are written by whoever settles them, in request order
/// (issue 9; PROTOCOL.md: replies come in request order): a refusal settled at once waits for the
/// accepted add before it whose commit is still in flight.
@Suite struct ReplySequencerTests {
    static func ids(_ lines: [String]) -> [Int] {
        lines.compactMap { line in
            guard case let .object(o)? = try? JSONValue.parse(Data(line.utf8)), case let .number(n)? = o["id"] else { return nil }
            return Int(n)
        }
    }

    @Test func aReplySettledEarlyWaitsForTheOnesBeforeIt() throws {
        try ConnectionOrderTests.withConnection { connection, peer in
            let replies = ReplySequencer(connection: connection)
            let numbers = (0..<4).map { _ in replies.reserve() }
            #expect(replies.outstanding == 4)
            // 3 and 1 first (refused at once), then 0 (its commit done), then 2.
            replies.settle(numbers[3], id: .number(3), .failure(WireError(.notAuthorized, "no")))
            replies.settle(numbers[1], id: .number(1), .failure(WireError(.badRequest, "no")))
            var p = pollfd(fd: peer, events: Int16(POLLIN), revents: 0)
            #expect(poll(&p, 1, 50) == 0, "nothing may be written before reply 0")
            replies.settle(numbers[0], id: .number(0), .success(Data("{}".utf8)))
            replies.settle(numbers[2], id: .number(2), .success(Data("{}".utf8)))
            #expect(Self.ids(ConnectionOrderTests.readLines(peer, count: 4)) == [0, 1, 2, 3])
            #expect(replies.outstanding == 0)
        }
    }

    @Test func manyThreadsSettlingAtOnceKeepTheOrder() async throws {
      try await ConnectionOrderTests.withConnection(limits: ConnectionLimits(maxOutputBytes: 1 << 24)) { connection, peer in
        let replies = ReplySequencer(connection: connection)
        let count = 2000
        let numbers = (0..<count).map { _ in replies.reserve() }
        // The reader blocks in poll(2): on a thread of its own, not one of the pool's two (in a
        // parallel run of the suites this test once read too few lines within its 10 s while
        // other suites held the pool; not reproduced alone).
        let reader = Task {
            await withCheckedContinuation { k in Thread.detachNewThread { k.resume(returning: ConnectionOrderTests.readLines(peer, count: count)) } }
        }
        await withTaskGroup(of: Void.self) { group in
            // Four settlers, each taking every fourth reply from the end backwards: most replies
            // arrive before their turn and are written by another thread.
            for lane in 0..<4 {
                group.addTask {
                    for i in stride(from: count - 1 - lane, through: 0, by: -4) {
                        replies.settle(numbers[i], id: .number(Double(i)), .success(Data("{}".utf8)))
                    }
                }
            }
        }
        await replies.drained()
        #expect(replies.outstanding == 0)
        #expect(Self.ids(await reader.value) == Array(0..<count))
      }
    }

    @Test func drainedWaitsForTheLastReply() async throws {
        try await confirmation("drained returns only after the last settle") { returned in
          try await ConnectionOrderTests.withConnection { connection, _ in
            let replies = ReplySequencer(connection: connection)
            let a = replies.reserve(), b = replies.reserve()
            let settledLast = Flag()
            let waiter = Task {
                await replies.drained()
                #expect(settledLast.value, "drained returned before every reply was written")
                returned()
            }
            replies.settle(b, id: .number(1), .success(Data("{}".utf8)))
            try await Task.sleep(nanoseconds: 20_000_000)
            settledLast.value = true
            replies.settle(a, id: .number(0), .success(Data("{}".utf8)))
            await waiter.value
          }
        }
    }
}

/// A Bool under a lock (NSLock: ThreadSanitizer cannot see Mutex on Linux).
private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var _value = false
    var value: Bool {
        get { lock.withLock { _value } }
        set { lock.withLock { _value = newValue } }
    }
}
