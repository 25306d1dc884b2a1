import Foundation
import InterludeEngine
import Testing
@testable import InterludeServer
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// Lines written on one thread inside an `OutputGathering` scope go out together when it ends, in
/// order (issue 9: an add's events and reply in one `send`, not one each).
@Suite struct OutputGatheringTests {
    static func readable(_ fd: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 1
    }

    @Test func linesInAScopeAreWrittenWhenItEndsInTheirOrder() throws {
        try ConnectionOrderTests.withConnection { connection, peer in
            OutputGathering.gather {
                connection.send(.event(WireEvent(event: "notificationDelivered", data: .number(1), time: 0)))
                connection.send(.event(WireEvent(event: "badgeChanged", data: .number(2), time: 0)))
                connection.reply(.reply(WireReply(id: .number(3), result: .object([:]))))
                #expect(!Self.readable(peer), "nothing is written before the scope ends")
            }
            #expect(Self.readable(peer), "the scope's end wrote the lines")
            // One read takes all three: they went out in one send.
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = read(peer, &buffer, buffer.count)
            let lines = String(decoding: buffer[0..<max(0, n)], as: UTF8.self).split(separator: "\n").map(String.init)
            #expect(lines.count == 3)
            #expect(lines.first?.contains("notificationDelivered") == true)
            #expect(lines.last?.hasPrefix(#"{"id":3"#) == true)
        }
    }

    @Test func withoutAScopeAReplyIsWrittenAtOnce() throws {
        try ConnectionOrderTests.withConnection { connection, peer in
            connection.reply(.reply(WireReply(id: .number(1), result: .object([:]))))
            #expect(Self.readable(peer))
        }
    }

    @Test func aScopeInsideAScopeIsPartOfIt() throws {
        try ConnectionOrderTests.withConnection { connection, peer in
            OutputGathering.gather {
                OutputGathering.gather { connection.reply(.reply(WireReply(id: .number(1), result: .object([:])))) }
                #expect(!Self.readable(peer), "the inner scope's end writes nothing")
                connection.reply(.reply(WireReply(id: .number(2), result: .object([:]))))
            }
            #expect(ReplySequencerTests.ids(ConnectionOrderTests.readLines(peer, count: 2)) == [1, 2])
        }
    }

    @Test func aConnectionClosedInTheScopeForItsOutputBoundWritesNothingHeld() async throws {
        try await ConnectionOrderTests.withConnection(limits: ConnectionLimits(maxOutputBytes: 30)) { connection, peer in
            OutputGathering.gather {
                connection.reply(.reply(WireReply(id: .number(1), result: .object([:]))))  // 21 bytes, held
                connection.reply(.reply(WireReply(id: .number(2), result: .object([:]))))  // 42 > 30: closed
            }
            var buffer = [UInt8](repeating: 0, count: 64)
            #expect(read(peer, &buffer, buffer.count) == 0, "closed, the held line dropped with the rest")
        }
    }
}
