import Foundation
import Testing
import InterludeClient
import InterludeServer
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// Issue 7's socket holes, each against a real in-process server (PROTOCOL.md "Limits").
@Suite(.serialized) struct ConnectionHardeningTests {
    static let hello = #"{"id":1,"method":"hello","params":{"app":"org.example.Hostile"}}"# + "\n"

    /// Hole 2: hello, 5,000 pipelined `status` without reading, 1 s, 70,000 bytes without a newline,
    /// close. The `tooLarge` path flushed after the write source was cancelled and the connection's
    /// deinit released a suspended `DispatchSourceWrite`: libdispatch killed the daemon (SIGILL).
    @Test func tooLargeAfterUnreadRepliesDoesNotCrashTheDaemon() async throws {
        let d = try TestDaemon()
        for _ in 0..<2 {
            let p = try d.rawConnect()
            _ = p.readLine()
            p.send(Self.hello)
            var batch = ""
            for i in 0..<5000 { batch += #"{"id":\#(i + 2),"method":"status"}"# + "\n" }
            p.send(batch)
            try await Task.sleep(nanoseconds: 1_000_000_000)
            p.send(bytes: [UInt8](repeating: UInt8(ascii: "a"), count: 70_000))
            p.closeNow()
            try await Task.sleep(nanoseconds: 300_000_000)
        }
        let c = try await InterludeClient.connect(socket: d.socket, app: "org.example.Next", replyTimeout: 5)
        #expect(try await c.status().version == "test")
    }
}
