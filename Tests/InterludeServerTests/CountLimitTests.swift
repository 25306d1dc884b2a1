import Foundation
import Testing
import InterludeClient
import InterludeEngine
import InterludeServer
import InterludePolicy
import InterludeWire

/// Count limits over the socket (PROTOCOL.md "Limits"): what one app can make the daemon hold is
/// bounded, and the one over a bound gets `limitReached` with the connection still usable. Found by
/// the stranger's review of issue 9: 45,000 sessions were accepted from one app and `status` then
/// passed `server.maxOutputBytes` (the CLI was cut off); 16,000 scheduled notifications made every
/// app's add 19 ms.
@Suite struct CountLimitTests {
    @Test func sessionRegisterPastThePerConnectionAndTotalLimitsIsRefused() async throws {
        let d = try TestDaemon(overlay: "{ server: { maxSessionsPerClient: 3, maxSessions: 5 } }")
        await d.start()
        let a = try await InterludeClient.connect(socket: d.socket, app: "org.example.A")
        for _ in 0..<3 { _ = try await a.register(category: .playback) }
        do {
            _ = try await a.register(category: .playback)
            Issue.record("a fourth session was accepted on one connection")
        } catch let e as WireError {
            #expect(e.code == .limitReached && e.message.contains("server.maxSessionsPerClient"), "\(e)")
        }
        #expect(try await a.status().sessions.count == 3, "the connection stays usable and holds 3")

        let b = try await InterludeClient.connect(socket: d.socket, app: "org.example.B")
        _ = try await b.register(category: .ambient)
        _ = try await b.register(category: .ambient)
        do {
            _ = try await b.register(category: .ambient)
            Issue.record("a sixth session was accepted")
        } catch let e as WireError {
            #expect(e.code == .limitReached && e.message.contains("server.maxSessions"), "\(e)")
        }
        // A connection's sessions are freed when it closes (A9): room again.
        a.close()
        var registered = false
        for _ in 0..<100 {
            guard !registered else { break }
            registered = (try? await b.register(category: .ambient)) != nil
            if !registered { try await Task.sleep(nanoseconds: 10_000_000) }
        }
        #expect(registered)
    }

    /// `status` lists at most `StatusResult.maxSessionsListed` sessions, those doing something first,
    /// and says how many it left out; its reply stays far under `server.maxOutputBytes`.
    @Test func statusWithThousandsOfSessionsStaysUnderTheOutputLimit() async throws {
        let d = try TestDaemon(maxOutputBytes: 256 * 1024)
        await d.start()
        let c = try await InterludeClient.connect(socket: d.socket, app: "org.example.Many")
        var ids: [AudioSessionID] = []
        for _ in 0..<1024 { ids.append(try await c.register(category: .playback, mode: .default, options: [.mixWithOthers])) }
        let last = ids[1023]
        _ = try await c.activate(last)
        let watcher = try await InterludeClient.connect(socket: d.socket, app: "org.interlude.CLI")
        let s = try await watcher.status()
        #expect(s.sessions.count == StatusResult.maxSessionsListed)
        #expect(s.sessionsOmitted == 1024 - StatusResult.maxSessionsListed)
        #expect(s.sessions.contains { $0.session == last && $0.state == .active }, "the active one is listed though its id is the last")
        let bytes = try JSONEncoder().encode(s).count
        #expect(bytes < 256 * 1024 / 2, "\(bytes) bytes")
    }

    /// At the smallest `server.maxOutputBytes` (64 KiB) the sessions `status` lists are bounded by
    /// bytes too (a page: a quarter of it), those doing something first: 256 sessions of app ids of
    /// 255 bytes are about 140 KB, and the reply closed `interlude status` as a client that does
    /// not read (found trying what the eighth session left).
    @Test func statusAtTheSmallestOutputBoundListsWhatFitsAPage() async throws {
        let d = try TestDaemon(maxOutputBytes: 64 * 1024)
        await d.start()
        let app = "org.example." + String(repeating: "m", count: 255 - 12)
        let c = try await InterludeClient.connect(socket: d.socket, app: app)
        var ids: [AudioSessionID] = []
        for _ in 0..<300 { ids.append(try await c.register(category: .playback, mode: .default, options: [.mixWithOthers])) }
        _ = try await c.activate(ids[299])
        let watcher = try await InterludeClient.connect(socket: d.socket, app: "org.interlude.CLI")
        let s = try await watcher.status()
        let listed = try s.sessions.map { try WireCoding.encode($0).count + 1 }.reduce(0, +)
        #expect(s.sessions.count >= 10 && listed <= 16 * 1024, "\(s.sessions.count) sessions, \(listed) bytes")
        #expect(s.sessions.count + (s.sessionsOmitted ?? 0) == 300)
        #expect(s.sessions.contains { $0.session == ids[299] && $0.state == .active }, "the active one is listed though its id is the last")
        // Streams no session owns (critical alerts' sounds, N3) are listed up to a page as well.
        for i in 0..<2000 { d.backend.push(.streamAdded(AudioStream(index: UInt32(1000 + i), role: "event", critical: true))) }
        var streams = s
        for _ in 0..<200 {
            streams = try await watcher.status()
            if streams.unmatchedStreams.count + (streams.unmatchedStreamsOmitted ?? 0) == 2000 { break }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        let streamBytes = try streams.unmatchedStreams.map { try WireCoding.encode($0).count + 1 }.reduce(0, +)
        #expect(streams.unmatchedStreams.count + (streams.unmatchedStreamsOmitted ?? 0) == 2000, "\(streams.unmatchedStreams.count) + \(streams.unmatchedStreamsOmitted ?? 0)")
        #expect(streams.unmatchedStreams.count >= 10 && streamBytes <= 16 * 1024, "\(streams.unmatchedStreams.count) streams, \(streamBytes) bytes")
        let order = s.sessions.map(\.session)
        let byID = order.sorted { (a: AudioSessionID, b: AudioSessionID) -> Bool in a.rawValue.count != b.rawValue.count ? a.rawValue.count < b.rawValue.count : a < b }
        #expect(order == byID, "listed in id order")
        #expect(try await watcher.status().version == "test", "the connection is open")
    }

    /// One entry of `status` stays under a page too: a session lists at most 32 of its streams
    /// (`streamsOmitted` counts the rest), and the texts any client of the audio server or the bus
    /// sets (`media.role`, `application.name`, a player's `Identity`) are kept to 255 bytes. 24
    /// streams with a 4,000-byte role on one session, or one player with a 600 KB `Identity`,
    /// made every `status` reply pass `server.maxOutputBytes` (a stranger's find).
    @Test func oneSessionsStreamsAndTheTextsOthersSetStayUnderAPage() async throws {
        let d = try TestDaemon(maxOutputBytes: 64 * 1024)
        await d.start()
        let c = try await InterludeClient.connect(socket: d.socket, app: "org.example.Loud")
        let loud = try await c.register(category: .playback)
        let role = String(repeating: "r", count: 4000)
        for i in 0..<60 { d.backend.push(.streamAdded(AudioStream(index: UInt32(100 + i), sessionTag: loud.rawValue, role: role))) }
        // An unmodified client's stream (an implicit session, A10) named by 20 KB, its role in
        // 2-byte characters.
        d.backend.push(.streamAdded(AudioStream(index: 999, role: String(repeating: "é", count: 3000), appName: String(repeating: "a", count: 20_000))))
        let watcher = try await InterludeClient.connect(socket: d.socket, app: "org.interlude.CLI")
        var status = try await watcher.status()
        for _ in 0..<200 {
            if let e = status.sessions.first(where: { $0.session == loud }), e.streams.count + (e.streamsOmitted ?? 0) == 60,
               status.sessions.contains(where: { $0.implicit }) { break }
            try await Task.sleep(nanoseconds: 10_000_000)
            status = try await watcher.status()
        }
        let entry = try #require(status.sessions.first { $0.session == loud })
        #expect(entry.streams.count == StatusResult.maxListedPerSession && entry.streamsOmitted == 60 - StatusResult.maxListedPerSession)
        #expect(entry.streams.allSatisfy { $0.role == String(repeating: "r", count: 255) })
        let implicit = try #require(status.sessions.first { $0.implicit })
        #expect(implicit.app == String(repeating: "a", count: 255))
        #expect(implicit.streams.first?.role == String(repeating: "é", count: 127), "cut on a character boundary")
        let bytes = try WireCoding.encode(status).count
        #expect(bytes < 64 * 1024, "\(bytes) bytes")

        // Many sessions interrupting one (A3: each `interruptSpokenAudioAndMixWithOthers` one
        // interrupts a `spokenAudio` session; 8,191 made its entry 72 KB, the next stranger's find):
        // the entry lists 32 of them.
        let book = try await c.register(category: .playback, mode: .spokenAudio, options: [.mixWithOthers])
        _ = try await c.activate(book)
        let other = try await InterludeClient.connect(socket: d.socket, app: "org.example.Prompts")
        var prompts: [AudioSessionID] = []
        for _ in 0..<40 {
            let p = try await other.register(category: .playback, options: [.interruptSpokenAudioAndMixWithOthers])
            try await other.setPlaying(p, true)
            _ = try await other.activate(p)
            prompts.append(p)
        }
        let withInterrupters = try await watcher.status()
        let booked = try #require(withInterrupters.sessions.first { $0.session == book })
        #expect(booked.interruptedBy.count == StatusResult.maxListedPerSession && booked.interruptedByOmitted == 40 - StatusResult.maxListedPerSession,
                "\(booked.interruptedBy.count) listed, \(booked.interruptedByOmitted ?? 0) left out")
        #expect(booked.interruptedBy == Array(prompts.sorted().prefix(StatusResult.maxListedPerSession)), "the first by id, in id order")
        #expect(MediaPlayerInfo(busName: "org.mpris.MediaPlayer2.big", pid: nil, identity: String(repeating: "i", count: 600_000),
                                desktopEntry: String(repeating: "d", count: 1000), facts: PlayerFacts(status: .playing)).identity?.utf8.count == 255)
    }

    /// `status`'s bounded lists take the first `k` in order with one pass (`firstInOrder`), not
    /// a sort of all of them: the same result as sorting and taking `k`, ties in the order they
    /// came, for every `k` from none to more than there are.
    @Test func theFirstKOfAListAreThoseASortGives() {
        var rng = SystemRandomNumberGenerator()
        for n in [0, 1, 2, 7, 33, 300] {
            let items = (0..<n).map { _ in (key: Int.random(in: 0..<20, using: &rng), place: Int.random(in: 0..<1000, using: &rng)) }
            for k in [0, 1, 2, 8, 32, 256, n, n + 5] {
                let picked = firstInOrder(k, of: items) { $0.key < $1.key }
                // Swift's sort is stable: of equal keys, the one that came first stays first.
                let sorted = items.enumerated().sorted { ($0.element.key, $0.offset) < ($1.element.key, $1.offset) }.map(\.element)
                #expect(picked.map(\.key) == sorted.prefix(k).map(\.key) && picked.map(\.place) == sorted.prefix(k).map(\.place),
                        "n \(n), k \(k)")
                // A lazy filter (as `status` passes) does not know its count: the one-pass path.
                let lazily = firstInOrder(k, of: items.lazy.filter { _ in true }) { $0.key < $1.key }
                #expect(lazily.map(\.key) == picked.map(\.key) && lazily.map(\.place) == picked.map(\.place), "lazy: n \(n), k \(k)")
            }
        }
        #expect(firstInOrder(3, of: Set(["s9", "s10", "s2", "s1"]), by: <) == ["s1", "s10", "s2"])
    }

    /// N8 over the wire: the 65th notification an app schedules is refused with `limitReached`;
    /// one without a trigger, and a replacement of a scheduled one, still go through.
    @Test func N8_theAppsPendingLimitIsLimitReachedOnTheWire() async throws {
        let d = try TestDaemon(overlay: #"{ authorization: { default: "grant" } }"#)
        await d.start()
        let c = try await InterludeClient.connect(socket: d.socket, app: "org.example.Reminders")
        _ = try await c.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .sound]),
                             as: AuthorizationResult.self)
        func add(_ id: String, trigger: Bool) async throws -> AddNotificationResult {
            try await c.call(NotificationMethod.add, AddNotificationParams(identifier: id, title: id, trigger: trigger ? TriggerParams(in: 3600) : nil),
                             as: AddNotificationResult.self)
        }
        for i in 0..<64 { _ = try await add("r\(i)", trigger: true) }
        do {
            _ = try await add("r64", trigger: true)
            Issue.record("a 65th pending notification was accepted")
        } catch let e as WireError {
            #expect(e.code == .limitReached && e.message.contains("maxPendingPerApp"), "\(e)")
        }
        #expect(try await add("r3", trigger: true).decision.rules == ["N8", "N10"], "a replacement is not new")
        #expect(try await add("now", trigger: false).decision.outcome == .delivered)
    }
}
