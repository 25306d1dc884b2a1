import Foundation
import Testing
import InterludePulse
import InterludeScenario

/// ``PulseClaim``: "one of us per audio server and user" announced in client properties (the
/// daemon's `interlude.manager`, issue 7 hole 12). The rule without a server, then on the real one:
/// each connection sees the other's claim, both agree on the holder, and a SIGKILLed holder's claim
/// goes away with its connection.
@Suite struct ClaimRuleTests {
    func client(_ index: UInt32, since: String?, uid: String = "1000", key: String = "k") -> PulseClient {
        var p = [key: "socket \(index)", key + ".uid": uid]
        if let since { p[key + ".since"] = since }
        return PulseClient(index: index, properties: p)
    }

    @Test func theEarliestAnnouncementHoldsTheClaim() {
        // The earliest `since` wins even with a higher index (PipeWire reuses client indexes).
        let a = client(9, since: "100"), b = client(3, since: "200")
        #expect(PulseClaim.holder(of: "k", uid: "1000", among: [a, b])?.index == 9)
        #expect(PulseClaim.holder(of: "k", uid: "1000", among: [b, a])?.index == 9)
        // The same stamp: the lower index.
        #expect(PulseClaim.holder(of: "k", uid: "1000", among: [client(7, since: "5"), client(4, since: "5")])?.index == 4)
        // A missing or malformed stamp never wins.
        #expect(PulseClaim.holder(of: "k", uid: "1000", among: [client(1, since: nil), client(2, since: "x"), client(8, since: "999")])?.index == 8)
        // Other users' claims and clients without the key do not count.
        #expect(PulseClaim.holder(of: "k", uid: "1000", among: [client(1, since: "1", uid: "0"), PulseClient(index: 2, properties: [:])]) == nil)
        #expect(PulseClaim.holder(of: "k", uid: "1000", among: []) == nil)
        #expect(PulseClaim(key: "k", value: "v").properties(since: 42, uid: "7") == ["k": "v", "k.uid": "7", "k.since": "42"])
    }
}

extension PulseAdapterTests {
    @Test("claim: two connections agree on the holder; a SIGKILLed holder's claim goes with its connection")
    func claimFollowsTheLiveClient() async throws {
        try TestServer.connect().disconnect()  // skip-or-fail rule when there is no server
        let key = "interlude.test.claim\(getpid())"
        let server = ProcessInfo.processInfo.environment["PULSE_SERVER"]
        let first = PulseConnection(server: server, clientName: "claim first", claim: PulseClaim(key: key, value: "first"))
        defer { first.disconnect() }
        try first.connect()
        let second = PulseConnection(server: server, clientName: "claim second", claim: PulseClaim(key: key, value: "second"))
        defer { second.disconnect() }
        let log = EventLog(second)
        try second.connect()
        let firstIndex = try #require(first.clientIndex)
        let secondIndex = try #require(second.clientIndex)
        #expect(firstIndex != secondIndex)
        // Both see both claims (PulseAudio and PipeWire keep a client's own properties) and agree.
        let listed = try second.clients()
        #expect(listed.first { $0.index == firstIndex }?.properties[key] == "first", "\(listed)")
        #expect(try await first.claimHolder()?.index == firstIndex)
        #expect(try await second.claimHolder()?.index == firstIndex)
        // The other's claim came as a client event when the second connected.
        #expect(await log.wait { if case let .clientChanged(c) = $0 { return c.index == firstIndex && c.properties[key] == "first" }; return false } != nil)

        // A process that claimed earlier (a stamp of 1 ns since 1970), killed with SIGKILL: while it
        // lives it holds the claim; its claim then goes away with its connection, nothing left over.
        let file = NSTemporaryDirectory() + "claim-\(getpid()).wav"
        try WAVFile.writeSine(path: file, frequency: 300, amplitude: 0.01, seconds: 20, sampleRate: 48000)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/paplay")
        holder.arguments = [file]
        var env = ProcessInfo.processInfo.environment
        env["PULSE_PROP"] = "\(key)=killed \(key).uid=\(PulseClaim.currentUID) \(key).since=1"
        holder.environment = env
        try holder.run()
        var seen: PulseClient?
        for _ in 0..<100 {
            seen = try await second.claimHolder()
            if seen?.properties[key] == "killed" { break }
            try await Task.sleep(for: .milliseconds(30))
        }
        #expect(seen?.properties[key] == "killed")
        #expect(seen?.processID == holder.processIdentifier)
        let mark = log.all.count
        kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()
        let killedIndex = seen?.index ?? .max
        #expect(await log.wait(from: mark, timeout: 3) { $0 == .clientRemoved(killedIndex) } != nil)
        #expect(try await second.claimHolder()?.index == firstIndex)
        first.disconnect()
        var after: PulseClient?
        for _ in 0..<100 {
            after = try await second.claimHolder()
            if after?.index == secondIndex { break }
            try await Task.sleep(for: .milliseconds(30))
        }
        #expect(after?.index == secondIndex, "the first's claim went with its connection")
    }
}
