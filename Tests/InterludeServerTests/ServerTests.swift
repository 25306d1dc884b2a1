import Foundation
import Testing
import InterludeClient
import InterludeConfig
import InterludeEngine
import InterludePolicy
import InterludeServer
import InterludeTestSupport
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// A daemon on a private socket with a fake audio server.
final class TestDaemon: @unchecked Sendable {
    let dir: String
    let socket: String
    let backend = FakeAudioBackend()
    let store: MemoryNotificationStore
    let sounds = FakeSoundPlayer()
    let engine: Engine
    let server: SocketServer

    init(maxOutputBytes: Int = 1 << 20, store: MemoryNotificationStore = MemoryNotificationStore(), overlay: String? = nil) throws {
        self.store = store
        dir = NSTemporaryDirectory() + "interlude-srv-\(UUID().uuidString.prefix(8))"
        socket = dir + "/socket"
        let config = try ConfigLoader.load(folders: [], overlay: try overlay.map { ("test", try JSON5.parse($0)) })
        engine = try Engine(config: config, audio: backend, sounds: sounds, store: store, version: "test")
        server = SocketServer(path: socket, engine: engine, maxOutputBytes: maxOutputBytes, log: { _ in })
        try server.start()
    }
    func start() async { await engine.start() }
    deinit { server.stop(); try? FileManager.default.removeItem(atPath: dir) }

    /// A raw connection: returns the fd after reading the greeting line.
    func rawConnect() throws -> RawPeer { try RawPeer(path: socket) }
}

/// A hand-driven peer that writes arbitrary bytes and reads lines.
final class RawPeer {
    let fd: Int32
    var framer = LineFramer(maxLineBytes: 1 << 20)
    var lines: [[UInt8]] = []
    init(path: String) throws {
        fd = try UnixSocket.connect(path)
        var tv = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }
    private var isOpen = true
    deinit { closeNow() }
    /// Closes the socket now (the daemon sees EOF).
    func closeNow() { if isOpen { isOpen = false; close(fd) } }
    func send(_ s: String) { _ = s.utf8CString.withUnsafeBufferPointer { Glibc.send(fd, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) } }
    func send(bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    /// The next line from the daemon, or nil on EOF/timeout.
    func readLine() -> ServerMessage? {
        rawLine().flatMap { try? ServerMessage.parse($0) }
    }
    /// The next line's bytes (without the newline), or nil on EOF/timeout.
    private func rawLine() -> [UInt8]? {
        while lines.isEmpty {
            var buf = [UInt8](repeating: 0, count: 65536)
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return nil }
            lines += (try? framer.feed(buf[0..<n])) ?? []
        }
        return lines.removeFirst()
    }
    func reply() -> WireReply? {
        while let m = readLine() { if case let .reply(r) = m { return r } }
        return nil
    }
    /// The next line from the daemon as written (without the newline), or nil on EOF/timeout.
    func readText() -> String? {
        rawLine().map { String(decoding: $0, as: UTF8.self) }
    }
}

@Suite(.serialized) struct ProtocolErrorTests {
    @Test func greetingThenHelloRequired() throws {
        let d = try TestDaemon()
        let p = try d.rawConnect()
        guard case let .greeting(g)? = p.readLine() else { Issue.record("no greeting"); return }
        #expect(g.protocol == interludeProtocolVersion)
        p.send(#"{"id":1,"method":"status"}"# + "\n")
        #expect(p.reply()?.error?.code == .helloRequired)
    }

    @Test func malformedLineUnknownMethodUnknownFieldThenServesNext() throws {
        let d = try TestDaemon()
        let p = try d.rawConnect()
        _ = p.readLine()
        p.send("this is not json\n")
        #expect(p.reply()?.error?.code == .badRequest)
        p.send(#"{"id":2,"method":"hello","params":{"app":"org.example.T"}}"# + "\n")
        #expect(p.reply()?.error == nil)
        p.send(#"{"id":3,"method":"frobnicate"}"# + "\n")
        let r = p.reply()
        #expect(r?.error?.code == .unknownMethod)
        #expect(r?.id == .number(3))
        p.send(#"{"id":4,"method":"session.register","params":{"category":"playback","volume":3}}"# + "\n")
        #expect(p.reply()?.error?.code == .unknownField)
        p.send(#"{"id":5,"method":"session.activate","params":{"session":"s999"}}"# + "\n")
        #expect(p.reply()?.error?.code == .notFound)
        // An empty id is shown as "" (the message read "no session  on this connection").
        p.send(#"{"id":7,"method":"session.activate","params":{"session":""}}"# + "\n")
        let empty = p.reply()?.error
        #expect(empty?.code == .notFound && empty?.message == "no session \"\" on this connection", "\(String(describing: empty))")
        p.send(#"{"id":6,"method":"status"}"# + "\n")
        #expect(p.reply()?.result != nil)
    }

    /// PROTOCOL.md's "Errors" transcript is what the daemon answers, byte for byte: each `->`
    /// line is sent (CRLF where the doc says so) and the `<-` line after it must come back. (A
    /// stranger found its unknown-category reply two wordings old.)
    @Test func theErrorsTranscriptInPROTOCOLIsWhatTheDaemonAnswers() throws {
        let here = URL(fileURLWithPath: #filePath)
        let doc = try String(contentsOf: here.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("PROTOCOL.md"), encoding: .utf8)
        guard let section = doc.range(of: "### Errors"), let open = doc.range(of: "```\n", range: section.upperBound..<doc.endIndex),
              let close = doc.range(of: "```", range: open.upperBound..<doc.endIndex) else {
            Issue.record("PROTOCOL.md has no Errors transcript"); return
        }
        let lines = doc[open.upperBound..<close.lowerBound].split(separator: "\n").map(String.init)
        let d = try TestDaemon()
        let p = try d.rawConnect()
        _ = p.readLine()
        p.send(#"{"id":0,"method":"hello","params":{"app":"org.example.Music"}}"# + "\n")
        while let l = p.readText(), !l.contains(#""id":0"#) {}
        var compared = 0
        for (i, line) in lines.enumerated() where line.hasPrefix("-> ") && i + 1 < lines.count && lines[i + 1].hasPrefix("<- ") {
            var request = String(line.dropFirst(3))
            let crlf = request.contains("# sent with CRLF")
            if let comment = request.range(of: "      #") { request = String(request[..<comment.lowerBound]) }
            p.send(request + (crlf ? "\r\n" : "\n"))
            let got = p.readText()
            #expect(got == String(lines[i + 1].dropFirst(3)), "PROTOCOL.md says, for \(request)")
            compared += 1
        }
        #expect(compared >= 12, "only \(compared) request/reply pairs found")
    }

    @Test func oneMebibyteLineGetsTooLargeAndCloseThenNextClientIsServed() async throws {
        let d = try TestDaemon()
        let p = try d.rawConnect()
        _ = p.readLine()
        p.send(bytes: [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20))
        let r = p.reply()
        #expect(r?.error?.code == .tooLarge)
        #expect(p.readLine() == nil)  // closed
        let c = try await InterludeClient.connect(socket: d.socket, app: "org.example.Next")
        #expect(try await c.status().version == "test")
    }

    /// The bytes after the cap are dropped unread (PROTOCOL.md "Framing"), and the client sees the
    /// connection end (EOF), not a reset: a Unix socket closed with unread bytes resets its peer.
    @Test func tooLargeEndsTheStreamWithoutAReset() throws {
        let d = try TestDaemon()
        let p = try d.rawConnect()
        _ = p.readLine()
        p.send(bytes: [UInt8](repeating: UInt8(ascii: "a"), count: 100 * 1024))  // fits the socket's buffers
        #expect(p.reply()?.error?.code == .tooLarge)
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = buf.withUnsafeMutableBytes { read(p.fd, $0.baseAddress, $0.count) }
        let error = n < 0 ? errno : 0
        #expect(n == 0, "read returned \(n), errno \(error) (\(error == ECONNRESET ? "ECONNRESET" : "other"))")
    }

    @Test func clientVanishingMidMessageDoesNotDisturbTheDaemon() async throws {
        let d = try TestDaemon()
        do {
            let p = try d.rawConnect()
            _ = p.readLine()
            p.send(#"{"id":1,"method":"hel"#)
        }  // closed mid-message
        let c = try await InterludeClient.connect(socket: d.socket, app: "org.example.Next")
        #expect(try await c.status().sessions.isEmpty)
    }

    @Test func appIdWithControlCharactersIsRefused() throws {
        let d = try TestDaemon()
        let p = try d.rawConnect()
        _ = p.readLine()
        p.send(#"{"id":1,"method":"hello","params":{"app":"a\u0000b"}}"# + "\n")
        #expect(p.reply()?.error?.code == .badRequest)
        p.send(#"{"id":2,"method":"hello","params":{"app":"org.example.Ok"}}"# + "\n")
        #expect(p.reply()?.error == nil)
        // The app id is given once: a second hello under another id is refused.
        p.send(#"{"id":3,"method":"hello","params":{"app":"org.example.Other"}}"# + "\n")
        #expect(p.reply()?.error?.code == .badRequest)
    }

    @Test func secondDaemonRefusesALiveSocket() throws {
        let d = try TestDaemon()
        let other = SocketServer(path: d.socket, engine: d.engine, log: { _ in })
        #expect(throws: SocketServer.StartError.self) { try other.start() }
    }

    @Test func socketIsPrivate() throws {
        let d = try TestDaemon()
        let attrs = try FileManager.default.attributesOfItem(atPath: d.socket)
        #expect((attrs[.posixPermissions] as? Int) == 0o600)
        let dirAttrs = try FileManager.default.attributesOfItem(atPath: d.dir)
        #expect((dirAttrs[.posixPermissions] as? Int) == 0o700)
    }
}

@Suite(.serialized) struct SessionProtocolTests {
    func nextEvent(_ c: InterludeClient, named name: String, timeout: Double = 3,
                   where match: @escaping @Sendable (WireEvent) -> Bool = { _ in true }) async -> WireEvent? {
        await withTaskGroup(of: WireEvent?.self) { g in
            g.addTask { for await e in c.events where e.event == name && match(e) { return e }; return nil }
            g.addTask { try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9)); return nil }
            let first = await g.next()!
            g.cancelAll()
            return first
        }
    }

    @Test func callInterruptsMusicAndItResumes_A4_A5() async throws {
        let d = try TestDaemon()
        await d.start()
        let music = try await InterludeClient.connect(socket: d.socket, app: "org.example.Music")
        let phone = try await InterludeClient.connect(socket: d.socket, app: "org.example.Phone")
        let m = try await music.register(category: .playback)
        try await music.setPlaying(m, true)
        #expect(try await music.activate(m).state == .active)
        let c = try await phone.register(category: .playAndRecord, mode: .voiceChat)
        _ = try await phone.activate(c)
        let began = await nextEvent(music, named: WireEventName.interruptionBegan)
        #expect(began?.data["reason"] == .string("call"))
        try await phone.deactivate(c)
        let ended = await nextEvent(music, named: WireEventName.interruptionEnded)
        #expect(ended?.data["shouldResume"] == .bool(true))
    }

    @Test func A4_onlyAPlayAndRecordSessionCanBeACall() async throws {
        let d = try TestDaemon()
        let app = try await InterludeClient.connect(socket: d.socket, app: "org.example.Game")
        let e = await #expect(throws: WireError.self) { _ = try await app.register(category: .ambient, mode: .voiceChat) }
        #expect(e?.code == .badRequest)
        #expect(e?.message.contains("needs category playAndRecord") == true)
        #expect(try await app.status().sessions.isEmpty)
    }

    @Test func activationDuringCallFailsWithInsufficientPriority_A4() async throws {
        let d = try TestDaemon()
        let phone = try await InterludeClient.connect(socket: d.socket, app: "org.example.Phone")
        let music = try await InterludeClient.connect(socket: d.socket, app: "org.example.Music")
        let c = try await phone.register(category: .playAndRecord, mode: .voiceChat)
        _ = try await phone.activate(c)
        let m = try await music.register(category: .playback)
        await #expect(throws: WireError(.insufficientPriority, "a call is active; activate with acceptsDelay to wait for it (A4)")) {
            _ = try await music.activate(m)
        }
        #expect(try await music.activate(m, acceptsDelay: true).state == .delayed)
    }

    /// Music playing on stream 7 and a navigation prompt (`duckOthers`) active over it: the
    /// daemon, the music app's and the prompt's connections, and the prompt's activation.
    func musicDuckedByAPrompt() async throws -> (TestDaemon, music: InterludeClient, nav: InterludeClient, ActivateResult) {
        let d = try TestDaemon()
        await d.start()
        let music = try await InterludeClient.connect(socket: d.socket, app: "org.example.Music")
        let m = try await music.register(category: .playback)
        d.backend.push(.streamAdded(AudioStream(index: 7, sessionTag: m.rawValue)))
        _ = try await music.activate(m)
        let nav = try await InterludeClient.connect(socket: d.socket, app: "org.example.Maps")
        let n = try await nav.register(category: .playback, mode: .voicePrompt, options: [.duckOthers])
        return (d, music, nav, try await nav.activate(n))
    }

    @Test func disconnectReleasesTheDuck_A9() async throws {
        let (d, music, nav, r) = try await musicDuckedByAPrompt()
        #expect(r.promptStyle == .normal)
        #expect(d.backend.lastGain(7) == -14)
        nav.close()
        let back = await nextEvent(music, named: WireEventName.duckChanged) { $0.data["ducked"] == .bool(false) }
        #expect(back?.data["ducked"] == .bool(false))
        for _ in 0..<100 { guard d.backend.lastGain(7) != 0 else { break }; try await Task.sleep(nanoseconds: 10_000_000) }
        #expect(d.backend.lastGain(7) == 0)
    }

    /// The daemon stopping just after a prompt's connection closed (SIGTERM closes the connections
    /// first: a stranger's finding): the duck's release has started but not reached the stream
    /// (its mute call is slow here), and the policy's output is unity already. Releasing the
    /// streams must still leave the music at 0 dB, not at the duck's −14 dB.
    @Test func stoppingDuringADucksReleaseLeavesTheStreamAtItsVolume_A7() async throws {
        let (d, music, nav, _) = try await musicDuckedByAPrompt()
        #expect(d.backend.lastGain(7) == -14)
        d.backend.delayMutes { _, _ in 0.3 }  // the release's server calls are slow
        nav.close()
        _ = await nextEvent(music, named: WireEventName.duckChanged) { $0.data["ducked"] == .bool(false) }
        #expect(d.backend.lastGain(7) == -14, "the release has not reached the stream yet")
        await d.engine.releaseStreams()
        #expect(d.backend.lastGain(7) == 0)
        #expect(!d.backend.muted(7))
    }

    /// Output changes to one stream are carried out in the order the policy decided them, however
    /// long each server call takes: a duck whose mute call is slow, then the ringer switched to
    /// silent (A12 mutes the ambient stream): the stream must end muted. Each change used to be its
    /// own Task, and the duck's "unmuted", written when its slow call returned, came last: the
    /// stream played on with the ringer silent.
    @Test func outputChangesToOneStreamAreAppliedInOrder_A12() async throws {
        let d = try TestDaemon()
        await d.start()
        let game = try await InterludeClient.connect(socket: d.socket, app: "org.example.Game")
        let g = try await game.register(category: .ambient)
        d.backend.push(.streamAdded(AudioStream(index: 7, sessionTag: g.rawValue)))
        _ = try await game.activate(g)
        // The next mute call on stream 7 (the duck's) takes 0.3 s, the ones after it none.
        let calls = d.backend.muteCallCount
        d.backend.delayMutes { stream, call in stream == 7 && call == calls + 1 ? 0.3 : 0 }
        let nav = try await InterludeClient.connect(socket: d.socket, app: "org.example.Maps")
        let n = try await nav.register(category: .playback, mode: .voicePrompt, options: [.duckOthers])
        let activation = Task { _ = try? await nav.activate(n) }  // replies after the duck (A11)
        try await Task.sleep(nanoseconds: 50_000_000)
        let cli = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        try await cli.setRinger(silent: true)  // while the duck's mute call is still on its way
        _ = await activation.value
        try await Task.sleep(nanoseconds: 500_000_000)
        #expect(d.backend.muteCallCount > calls + 1, "the ringer's mute was not asked for")
        #expect(d.backend.muted(7), "stream 7 plays with the ringer silent (A12)")
        #expect(d.backend.lastGain(7) == -14, "gains written: \(d.backend.ramps.filter { $0.stream == 7 }.map(\.db))")
    }

    @Test func unmodifiedPhoneStreamInterruptsMusic_A10() async throws {
        let d = try TestDaemon()
        await d.start()
        let music = try await InterludeClient.connect(socket: d.socket, app: "org.example.Music")
        let m = try await music.register(category: .playback)
        try await music.setPlaying(m, true)
        _ = try await music.activate(m)
        d.backend.push(.streamAdded(AudioStream(index: 40, pid: 99999, role: "phone", appName: "paplay")))
        let began = await nextEvent(music, named: WireEventName.interruptionBegan)
        #expect(began?.data["reason"] == .string("call"))
        d.backend.push(.streamRemoved(40))
        let ended = await nextEvent(music, named: WireEventName.interruptionEnded)
        #expect(ended?.data["shouldResume"] == .bool(true))
    }

    /// The user's tool (`interlude watch`) sees every session's events; another app's
    /// subscription does not (PrivacyTests, issue 7).
    @Test func theUsersSubscribedToolSeesOtherClientsEvents() async throws {
        let d = try TestDaemon()
        let watcher = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        try await watcher.subscribe()
        let music = try await InterludeClient.connect(socket: d.socket, app: "org.example.Music")
        let radio = try await InterludeClient.connect(socket: d.socket, app: "org.example.Radio")
        let m = try await music.register(category: .playback)
        _ = try await music.activate(m)
        let r = try await radio.register(category: .playback)
        _ = try await radio.activate(r)
        let e = await nextEvent(watcher, named: WireEventName.interruptionBegan)
        #expect(e?.data["session"] == .string(m.rawValue))
    }
}
