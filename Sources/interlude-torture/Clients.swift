import Foundation
import InterludeClient
import InterludeMeasure
import InterludePolicy
import InterludeWire

/// Row 3: `clients` connections at once, each then sending `requests` requests one after another,
/// a mix of audio calls (register, activate, setPlaying, deactivate of an `ambient` session, which
/// mixes, so no client interrupts another; `status`) and notification calls (add, delivered). Every
/// connection must be served or refused with `rateLimited` (PROTOCOL.md: past `server.maxClients`);
/// every request of a served one answered (a result or a documented error code). Not answered
/// within the reply timeout (60 s) or before the row's deadline counts as lost.
struct ClientsRow {
    let ctx: TortureContext
    /// The row stops sending when this many seconds have passed (what is not sent then is lost).
    let deadline = 240.0
    let maxClients = 256

    func run() async -> TortureRow {
        let dir = ctx.work + "/clients"
        var problems: [String] = []
        var daemon: DaemonProcess?
        var served = 0, refused = 0, otherRefusals: [String] = []
        var book = RequestBook()
        var rss: (before: Int?, peak: Int?, after: Int?) = (nil, nil, nil)
        var seconds = 0.0
        do {
            let config = try writeConfig(dir + "/config", "{ authorization: { default: \"grant\" }, server: { maxClients: \(maxClients), maxClientsPerProcess: 65536 } }")
            let d = DaemonProcess(bin: ctx.bin, folder: dir, config: config, pulseServer: ctx.pulseServer)
            daemon = d
            try await d.start()
            await sleep(1)
            rss.before = d.residentBytes
            let sampler = RSSSampler(pid: d.pid)
            let socket = d.socket
            let t0 = now()
            // Every client connects first; then all send at once.
            let connected = await withTaskGroup(of: (Int, Result<InterludeClient, Error>).self) { group in
                for i in 0..<ctx.clients {
                    group.addTask {
                        do { return (i, .success(try await InterludeClient.connect(socket: socket, app: "org.interlude.torture.C\(i)", replyTimeout: 60))) }
                        catch { return (i, .failure(error)) }
                    }
                }
                var out: [(Int, InterludeClient)] = []
                for await (i, r) in group {
                    switch r {
                    case let .success(c): out.append((i, c))
                    case let .failure(e as WireError) where e.code == .rateLimited: refused += 1
                    case let .failure(e): otherRefusals.append("\(e)")
                    }
                }
                return out
            }
            served = connected.count
            let requests = ctx.requests
            let deadline = t0 + self.deadline
            book = await withTaskGroup(of: RequestBook.self) { group in
                for (i, c) in connected {
                    group.addTask {
                        var b = RequestBook()
                        var session: AudioSessionID?
                        for k in 0..<requests {
                            guard now() < deadline else { b.notSent += requests - k; break }
                            switch k % 10 {
                            case 0: await b.time("requestAuthorization") {
                                _ = try await c.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]), as: AuthorizationResult.self)
                            }
                            case 1: await b.time("session.register") { session = try await c.register(category: .ambient) }
                            case 2: await b.time("session.activate") { if let s = session { _ = try await c.activate(s) } }
                            case 3: await b.time("session.setPlaying") { if let s = session { try await c.setPlaying(s, true) } }
                            case 4, 9: await b.time("notification.add") {
                                _ = try await c.call(NotificationMethod.add, AddNotificationParams(identifier: "r\(k)", title: "client \(i) request \(k)"),
                                                     as: AddNotificationResult.self)
                            }
                            case 5: await b.time("status") { _ = try await c.status() }
                            case 6: await b.time("session.deactivate") { if let s = session { try await c.deactivate(s) } }
                            case 7: await b.time("notification.delivered") {
                                _ = try await c.call(NotificationMethod.delivered, ListNotificationsParams(), as: NotificationListResult.self)
                            }
                            default: await b.time("focus.status") {
                                _ = try await c.call(NotificationMethod.focusStatus, [String: String](), as: FocusStatusResult.self)
                            }
                            }
                        }
                        c.close()
                        return b
                    }
                }
                var all = RequestBook()
                for await b in group { all.merge(b) }
                return all
            }
            seconds = now() - t0
            sampler.stop()
            rss.peak = sampler.peak
            await sleep(2)
            rss.after = d.residentBytes
            _ = d.checkAlive("during the clients row")
        } catch {
            problems.append("stopped: \(error)")
        }
        daemon?.stop()
        let crashes = daemon?.crashes ?? []
        problems += crashes
        if served + refused + otherRefusals.count != ctx.clients { problems.append("\(ctx.clients - served - refused - otherRefusals.count) connections unaccounted for") }
        if served > maxClients { problems.append("\(served) served, more than server.maxClients \(maxClients)") }
        if !otherRefusals.isEmpty { problems.append("\(otherRefusals.count) connections refused other than by rateLimited, e.g. \(otherRefusals[0])") }
        problems += book.unansweredExamples.map { "unanswered: \($0)" }
        let s = Stats(book.latencies)
        let codes = book.codes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return TortureRow(
            name: "\(ctx.clients) concurrent clients × \(ctx.requests) requests",
            tried: "\(ctx.clients) connections; \(served) served × \(ctx.requests) = \(served * ctx.requests) requests",
            failed: book.unanswered + book.notSent + otherRefusals.count,
            figures: "\(served) served, \(refused) refused with rateLimited (maxClients \(maxClients)); \(book.answered) answered, "
                + "\(book.unanswered) without a reply in 60 s, \(book.notSent) not sent by the \(Int(deadline)) s deadline"
                + (codes.isEmpty ? "" : " (errors: \(codes))") + "; p50 \(ms(s.median)), p99 \(ms(s.quantile(0.99))), "
                + String(format: "%.0f requests/s over %.0f s", Double(book.answered) / max(seconds, 0.001), seconds)
                + "; slowest calls (p50/p99 ms): \(book.slowestMethods(3))"
                + "; daemon RSS \(mb(rss.before)) before, \(mb(rss.peak)) peak, \(mb(rss.after)) after; daemon crashes \(crashes.count)",
            problems: problems)
    }
}
