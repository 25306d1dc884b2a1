import Foundation
import InterludeClient
import InterludePolicy
import InterludeTestSupport
import InterludeWire
import Synchronization
import Testing

/// N15 under load with the real daemon and its group commit (issue 9): 8 clients pipeline
/// `notification.add`s; the daemon is killed with SIGKILL in the middle of the burst, 20 times
/// over the same state folder; after each restart every notification that was acknowledged — in
/// this round or any earlier one — is in the center exactly once. (A request whose reply never came
/// may or may not be there: its commit may have finished just before the kill.)
@Suite(.serialized) struct NotificationCrashEndToEndTests {
    /// What the clients saw: the identifiers acknowledged, by app, and the requests in flight.
    final class Tally: Sendable {
        let acknowledged = Mutex<[String: Set<String>]>([:])
        let inFlight = Mutex(0)
        /// "app/identifier" of each `notificationDelivered` the user's subscribed tool saw.
        let watched = Mutex<Set<String>>([])
    }

    static let clients = 8
    static let lanes = 4  // requests in flight per client

    /// The last lines of a daemon's log (the work folder is removed when the test ends).
    static func logTail(_ path: String, lines: Int = 15) -> String {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? "(no log)"
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    /// The 8 bursting apps, connected and asked for authorization.
    static func burstApps(socket: String) async throws -> [InterludeClient] {
        try await connectAuthorizedApps(socket: socket, (0..<clients).map { "org.example.Burst\($0)" })
    }

    /// Each app adds notifications on `lanes` lanes, one after another per lane, until the daemon
    /// goes away (identifiers `PREFIX-cI-lL-K`); `tally` counts what is in flight and acknowledged.
    static func burst(_ apps: [InterludeClient], idPrefix: String, tally: Tally) -> Task<Void, Never> {
        tally.inFlight.withLock { $0 = 0 }
        return Task {
            await withTaskGroup(of: Void.self) { group in
                for (i, c) in apps.enumerated() {
                    for lane in 0..<lanes {
                        group.addTask {
                            for k in 0... {
                                let id = "\(idPrefix)-c\(i)-l\(lane)-\(k)"
                                tally.inFlight.withLock { $0 += 1 }
                                do {
                                    _ = try await c.call(NotificationMethod.add, AddNotificationParams(identifier: id, title: "burst \(k)"),
                                                         as: AddNotificationResult.self)
                                } catch {
                                    return  // the daemon is gone
                                }
                                tally.inFlight.withLock { $0 -= 1 }
                                _ = tally.acknowledged.withLock { $0["org.example.Burst\(i)", default: []].insert(id) }
                            }
                        }
                    }
                }
            }
        }
    }

    @Test func N15_sigkillDuringAnEightClientBurstLosesNothingAcknowledged() async throws {
        let w = try WorkFolder("e2e-n15-burst")
        defer { w.remove() }
        // Every app granted; the center keeps everything (N11's per-app and total caps would drop
        // the oldest).
        try w.config(#"{ authorization: { default: "grant" }, bursts: { maxDeliveredPerApp: 100000, maxDeliveredTotal: 1000000 } }"#)
        let tally = Tally()
        var totalAcknowledged = 0
        var killedWithRequestsInFlight = 0
        var startsRetried = 0
        for round in 0...20 {
            var daemon = try DaemonProcess(socket: w.socket, work: w.path)
            if !SocketProbe.live(w.socket) && !daemon.isRunning {
                // Seen about once in 100 starts right after a SIGKILL, here and in CI: the new
                // daemon exits 1 before its first log line (not understood yet; a second start over
                // the same state works, as systemd's Restart=on-failure would do). Counted and said.
                startsRetried += 1
                print("N15 burst crash: round \(round): the daemon ended (\(daemon.exit.map { "\($0)" } ?? "running")) before listening, without a log line; started again")
                daemon = try DaemonProcess(socket: w.socket, work: w.path)
            }
            defer { if daemon.isRunning { daemon.kill9() } }
            try #require(SocketProbe.live(w.socket), "the daemon did not start (round \(round), \(daemon.exit.map { "\($0)" } ?? "running")); its log ends: \(Self.logTail(w.path + "/log"))")

            // After the restart: everything acknowledged so far, exactly once.
            let user = try await InterludeClient.connect(socket: w.socket, app: "org.interlude.CLI")
            let center = try await user.wholeCenter(all: true)  // every page
            user.close()
            var count: [String: [String: Int]] = [:]
            for n in center.notifications { count[n.app, default: [:]][n.identifier, default: 0] += 1 }
            for (app, ids) in tally.acknowledged.withLock({ $0 }) {
                for id in ids where count[app]?[id] != 1 {
                    Issue.record("round \(round): acknowledged \(app)/\(id) is in the center \(count[app]?[id] ?? 0) times")
                }
            }
            if round == 20 { break }  // the restart after the 20th kill was checked

            // A burst from 8 clients, killed in the middle.
            let apps = try await Self.burstApps(socket: w.socket)
            let burst = Self.burst(apps, idPrefix: "r\(round)", tally: tally)
            // The kill lands 100–300 ms after the burst's first acknowledgement (on a loaded
            // machine the clients' first commit can take longer than the random wait itself).
            let before = totalAcknowledged
            let firstAck = Date().addingTimeInterval(10)
            while tally.acknowledged.withLock({ $0.values.reduce(0) { $0 + $1.count } }) == before, Date() < firstAck {
                try await Task.sleep(nanoseconds: 5_000_000)
            }
            try await Task.sleep(nanoseconds: UInt64.random(in: 100_000_000...300_000_000))
            if tally.inFlight.withLock({ $0 }) > 0 { killedWithRequestsInFlight += 1 }
            daemon.kill9()
            await burst.value
            apps.forEach { $0.close() }
            let now = tally.acknowledged.withLock { $0.values.reduce(0) { $0 + $1.count } }
            #expect(now > totalAcknowledged, "round \(round): nothing was acknowledged before the kill")
            totalAcknowledged = now
        }
        // Each kill must land in the middle of the burst, or the test would prove little.
        #expect(killedWithRequestsInFlight >= 16, "only \(killedWithRequestsInFlight) of 20 kills found requests in flight")
        #expect(startsRetried <= 2, "\(startsRetried) of 21 starts exited before listening")
        print("N15 burst crash: 20 kills during 8-client bursts, \(totalAcknowledged) notifications acknowledged, "
              + "every one in the center exactly once after each restart")
    }
    /// SIGTERM in the middle of an 8-client burst (issue 9, a fresh user's finding): the daemon
    /// stops reading, lets the requests being decided finish, answers them and only then closes,
    /// 5 times over the same state folder. After each restart: every acknowledged notification is
    /// in the center exactly once (N15), every notification saved in the burst was acknowledged
    /// to its client (none saved whose client only saw the connection close), the user's
    /// subscribed tool saw each acknowledged one delivered, and the daemon exited 0.
    @Test func N15_sigtermDuringABurstAnswersEverythingItSavedBeforeItCloses() async throws {
        let w = try WorkFolder("e2e-n15-term")
        defer { w.remove() }
        try w.config(#"{ authorization: { default: "grant" }, bursts: { maxDeliveredPerApp: 100000, maxDeliveredTotal: 1000000 } }"#)
        let tally = Tally()
        let rounds = 5
        var unansweredAtStop = 0
        var stoppedWithRequestsInFlight = 0
        for round in 0...rounds {
            let daemon = try DaemonProcess(socket: w.socket, work: w.path)
            defer { if daemon.isRunning { daemon.kill9() } }
            try #require(SocketProbe.live(w.socket), "the daemon did not start (round \(round)); its log ends: \(Self.logTail(w.path + "/log"))")

            let user = try await InterludeClient.connect(socket: w.socket, app: "org.interlude.CLI")
            let center = try await user.wholeCenter(all: true)
            var count: [String: Int] = [:]
            for n in center.notifications where n.app.hasPrefix("org.example.Burst") { count[n.app + "/" + n.identifier, default: 0] += 1 }
            let acknowledged = Set(tally.acknowledged.withLock { $0.flatMap { app, ids in ids.map { app + "/" + $0 } } })
            for key in acknowledged where count[key] != 1 {
                Issue.record("round \(round): acknowledged \(key) is in the center \(count[key] ?? 0) times")
            }
            for key in count.keys where !acknowledged.contains(key) {
                Issue.record("round \(round): \(key) was saved, but its client never got the reply")
            }
            let seen = tally.watched.withLock { $0 }
            for key in acknowledged where !seen.contains(key) {
                Issue.record("round \(round): the subscribed tool never saw acknowledged \(key) delivered")
            }
            if round == rounds { user.close(); break }

            // The user's tool watches; 8 apps burst; SIGTERM in the middle.
            try await user.subscribe()
            let watching = Task {
                for await e in user.events where e.event == NotificationEventName.delivered {
                    guard case let .object(d) = e.data, case let .object(n)? = d["notification"],
                          case let .string(app)? = n["app"], case let .string(id)? = n["identifier"] else { continue }
                    _ = tally.watched.withLock { $0.insert(app + "/" + id) }
                }
            }
            let apps = try await Self.burstApps(socket: w.socket)
            let burst = Self.burst(apps, idPrefix: "t\(round)", tally: tally)
            let before = tally.acknowledged.withLock { $0.values.reduce(0) { $0 + $1.count } }
            let firstAck = Date().addingTimeInterval(10)
            while tally.acknowledged.withLock({ $0.values.reduce(0) { $0 + $1.count } }) == before, Date() < firstAck {
                try await Task.sleep(nanoseconds: 5_000_000)
            }
            try await Task.sleep(nanoseconds: UInt64.random(in: 100_000_000...300_000_000))
            if tally.inFlight.withLock({ $0 }) > 0 { stoppedWithRequestsInFlight += 1 }
            daemon.process.signal(SIGTERM)
            await burst.value
            unansweredAtStop += tally.inFlight.withLock { $0 }
            let ended = daemon.process.wait()
            #expect(ended == .exited(0),
                    "round \(round): the daemon ended with \(ended.map { "\($0)" } ?? "?") after SIGTERM; its log ends: \(Self.logTail(w.path + "/log"))")
            await watching.value  // the tool's connection closed with the daemon
            apps.forEach { $0.close() }
            user.close()
        }
        // The stop must land in the middle of the bursts for the test to prove anything.
        #expect(stoppedWithRequestsInFlight >= 3, "only \(stoppedWithRequestsInFlight) of \(rounds) stops found requests in flight")
        print("N15 SIGTERM: \(rounds) stops during 8-client bursts, \(tally.acknowledged.withLock { $0.values.reduce(0) { $0 + $1.count } }) acknowledged, "
              + "\(unansweredAtStop) requests unanswered at the stops")
    }
}
