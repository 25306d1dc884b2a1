import Foundation
import Testing
@testable import InterludeServer
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// A connection writes a reply at once on the caller's thread when nothing is queued before it
/// (issue 9: one thread hand-off less per reply). Messages must still reach the peer in the order
/// they were sent: an event queued for encoding on the connection's queue (`send`) goes out before
/// a reply produced after it.
@Suite struct ConnectionOrderTests {
    /// Reads lines from `fd` until `count` have arrived (or 10 s pass).
    static func readLines(_ fd: Int32, count: Int) -> [String] {
        var lines: [String] = []
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        let deadline = Date().addingTimeInterval(10)
        while lines.count < count, Date() < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 100) > 0 else { continue }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            buffer += chunk[0..<n]
            while let nl = buffer.firstIndex(of: 0x0a) {
                lines.append(String(decoding: buffer[..<nl], as: UTF8.self))
                buffer.removeSubrange(...nl)
            }
        }
        return lines
    }

    /// A started connection on one end of a socket pair, the peer's end, for `body`.
    static func withConnection(_ body: (Connection, Int32) throws -> Void) throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[1]) }
        let connection = Connection(fd: fds[0], pid: getpid(), limits: ConnectionLimits(), log: { _ in })
        connection.start()
        defer { connection.close() }
        try body(connection, fds[1])
    }

    /// ``withConnection(_:)`` for an async `body`, with the connection's `limits`.
    static func withConnection(limits: ConnectionLimits = ConnectionLimits(), _ body: (Connection, Int32) async throws -> Void) async throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[1]) }
        let connection = Connection(fd: fds[0], pid: getpid(), limits: limits, log: { _ in })
        connection.start()
        defer { connection.close() }
        try await body(connection, fds[1])
    }

    @Test func eventsAndRepliesKeepTheOrderTheyWereSentIn() throws {
        try Self.withConnection { connection, peer in
            // Alternating: an event (encoded later, on the connection's queue), then a reply
            // (encoded here, and written at once when nothing is ahead of it).
            let rounds = 500
            for i in 0..<rounds {
                connection.send(.event(WireEvent(event: "tick", data: .number(Double(2 * i)), time: 0)))
                connection.reply(.reply(WireReply(id: .number(Double(2 * i + 1)), result: .object([:]))))
            }
            let lines = Self.readLines(peer, count: 2 * rounds)
            #expect(lines.count == 2 * rounds)
            var order: [Int] = []
            for line in lines {
                guard case let .object(o)? = try? JSONValue.parse(Data(line.utf8)) else { continue }
                if case let .number(n)? = o["data"] { order.append(Int(n)) }
                if case let .number(n)? = o["id"] { order.append(Int(n)) }
            }
            #expect(order == Array(0..<(2 * rounds)))
        }
    }

    @Test func aReplyWithNothingAheadIsWrittenBeforeReplyReturns() throws {
        try Self.withConnection { connection, peer in
            // The connection's queue is held busy: a reply that needed it could not be written.
            let held = DispatchSemaphore(value: 0)
            connection.queue.async { held.wait() }
            connection.reply(.reply(WireReply(id: .number(7), result: .object([:]))))
            // Already in the socket: readable now, without the connection's queue.
            var p = pollfd(fd: peer, events: Int16(POLLIN), revents: 0)
            #expect(poll(&p, 1, 0) == 1)
            held.signal()
            #expect(Self.readLines(peer, count: 1) == [#"{"id":7,"result":{}}"#])
        }
    }
}

/// PROTOCOL.md "Order" for `session.deactivate` (the twelfth session's third stranger: the order
/// of the `{}` reply against the `activated` and `interruptionEnded` events was not stated): the
/// events a call's end causes for the connection that ends it (its delayed session `activated`,
/// its music's `interruptionEnded`) are written before the reply.
@Suite struct DeactivateOrderTests {
    @Test func theEventsOfACallsEndComeBeforeItsReply_A4_A5() throws {
        let d = try TestDaemon()
        let p = try d.rawConnect()
        #expect(p.hello("org.example.Phone"))
        // Mixable music: the call interrupts it (A4), the delayed podcast does not (A1).
        let music = p.session(p.call(2, "session.register", #"{"category":"playback","options":["mixWithOthers"]}"#))
        let phone = p.session(p.call(3, "session.register", #"{"category":"playAndRecord","mode":"voiceChat"}"#))
        _ = p.call(5, "session.activate", #"{"session":"\#(music)"}"#)
        _ = p.call(6, "session.setPlaying", #"{"session":"\#(music)","playing":true}"#)
        _ = p.call(7, "session.activate", #"{"session":"\#(phone)"}"#)
        let podcast = p.session(p.call(8, "session.register", #"{"category":"playback","mode":"spokenAudio"}"#))
        #expect(p.call(9, "session.activate", #"{"session":"\#(podcast)","acceptsDelay":true}"#)?.result?["state"]?.stringValue == "delayed")
        let seen = p.eventsThenReply(10, "session.deactivate", #"{"session":"\#(phone)"}"#) { e in
            "\(e.event) \(e.data["session"]?.stringValue ?? "")"
        }
        // The delayed podcast is activated first (A4), then the music resumes (A5); both before
        // the reply.
        #expect(seen == ["activated \(podcast)", "interruptionEnded \(music)", "reply 10"], "\(seen)")
    }

    /// The same for a prompt's end: the `duckChanged` of the end of its duck comes before the reply.
    @Test func theEndOfADuckIsSaidBeforeTheReply_A2() throws {
        let d = try TestDaemon()
        let p = try d.rawConnect()
        #expect(p.hello("org.example.Navigation"))
        let music = p.session(p.call(2, "session.register", #"{"category":"playback"}"#))
        let prompt = p.session(p.call(3, "session.register", #"{"category":"playback","mode":"voicePrompt","options":["duckOthers"]}"#))
        _ = p.call(4, "session.activate", #"{"session":"\#(music)"}"#)
        #expect(p.call(5, "session.activate", #"{"session":"\#(prompt)"}"#)?.result?["ducked"] != nil)
        let seen = p.eventsThenReply(6, "session.deactivate", #"{"session":"\#(prompt)"}"#) { e in
            "\(e.event) \(e.data["session"]?.stringValue ?? "") \(e.data["ducked"]?.boolValue.map(String.init) ?? "")"
        }
        #expect(seen == ["duckChanged \(music) false", "reply 6"], "\(seen)")
    }
}

extension RawPeer {
    /// Says `hello` as `app` (id 1); whether it was answered without an error.
    func hello(_ app: String) -> Bool {
        send(#"{"id":1,"method":"hello","params":{"app":"\#(app)"}}"# + "\n")
        return reply().map { $0.error == nil } ?? false
    }

    /// Sends one request and returns its reply (the events before it are skipped).
    func call(_ id: Int, _ method: String, _ params: String) -> WireReply? {
        send(#"{"id":\#(id),"method":"\#(method)","params":\#(params)}"# + "\n")
        return reply()
    }

    /// The `session` of a `session.register` reply ("?" if there is none).
    func session(_ r: WireReply?) -> String { r?.result?["session"]?.stringValue ?? "?" }

    /// Sends one request and returns, in the order they came, each event before its reply (as
    /// `describe` says it) and then "reply ID".
    func eventsThenReply(_ id: Int, _ method: String, _ params: String, describe: (WireEvent) -> String) -> [String] {
        send(#"{"id":\#(id),"method":"\#(method)","params":\#(params)}"# + "\n")
        var seen: [String] = []
        while let m = readLine() {
            switch m {
            case let .event(e): seen.append(describe(e))
            case let .reply(r):
                seen.append("reply \(r.id)")
                return seen
            default: break
            }
        }
        return seen
    }
}
