import Foundation
import InterludeClient
import InterludeMeasure
import InterludePolicy
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// A connection that says `hello` and `subscribe` and then never reads (raw socket).
final class SlowConsumer {
    let fd: Int32
    init(socket: String, app: String) throws {
        fd = try UnixSocket.connect(socket)
        let lines = "{\"id\":1,\"method\":\"hello\",\"params\":{\"app\":\"\(app)\"}}\n{\"id\":2,\"method\":\"subscribe\"}\n"
        _ = lines.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    /// `POLLRDHUP` (Linux, `_GNU_SOURCE`: Glibc does not export it to Swift): the peer shut its end.
    static let pollReadHangUp: Int16 = 0x2000

    /// Whether the daemon has closed its end (POLLRDHUP), without reading.
    var disconnected: Bool {
        var p = pollfd(fd: fd, events: Self.pollReadHangUp, revents: 0)
        return poll(&p, 1, 0) > 0 && (p.revents & (Self.pollReadHangUp | Int16(POLLHUP))) != 0
    }

    /// Reads what is left (after a disconnect: up to EOF) and returns the byte count.
    func drain() -> Int {
        var total = 0
        var buf = [UInt8](repeating: 0, count: 65536)
        var tv = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        while true {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            total += n
        }
        return total
    }

    deinit { close(fd) }
}

/// Row 4: `slowConsumers` subscribers never read while an app floods notifications with 16 KiB
/// bodies, whose events reach every subscriber (and, without subscribing, the app's own
/// connections: the consumers say `hello` as that app, so they get the events whatever the
/// privacy rule). Each must be disconnected once `server.maxOutputBytes` (1 MiB) of output piles
/// up; the daemon's memory must stay bounded (peak growth ≤ 64 MB + 2 × consumers × 1 MiB); other
/// clients' `status` p99 during the flood must stay within 3 × (+50 ms) of the same flood without
/// slow consumers.
struct SlowConsumersRow {
    let ctx: TortureContext
    let notificationsPerPhase = 150
    let bodyBytes = 16 * 1024
    let maxOutputBytes = 1 << 20
    let floodApp = "org.interlude.torture.Flood"

    func flood(_ c: InterludeClient, phase: Int, book: inout RequestBook) async {
        let body = String(repeating: "x", count: bodyBytes)
        for k in 0..<notificationsPerPhase {
            await book.time("notification.add") {
                _ = try await c.call(NotificationMethod.add, AddNotificationParams(identifier: "p\(phase)-\(k)", title: "flood \(k)", body: body),
                                     as: AddNotificationResult.self)
            }
        }
    }

    func run() async -> TortureRow {
        let dir = ctx.work + "/slow"
        var problems: [String] = []
        var daemon: DaemonProcess?
        var cut = 0, drained: [Int] = []
        var rss: (before: Int?, peak: Int?, after: Int?) = (nil, nil, nil)
        var p99: (alone: Double?, slow: Double?) = (nil, nil)
        var bystanderLost = 0
        var floodBook = RequestBook()
        do {
            let config = try writeConfig(dir + "/config", "{ authorization: { default: \"grant\" }, server: { maxOutputBytes: \(maxOutputBytes) } }")
            let d = DaemonProcess(bin: ctx.bin, folder: dir, config: config, pulseServer: ctx.pulseServer)
            daemon = d
            try await d.start()
            let producer = try await InterludeClient.connect(socket: d.socket, app: floodApp)
            defer { producer.close() }
            let drainOwn = Task.detached { for await _ in producer.events {} }
            defer { drainOwn.cancel() }
            _ = try await producer.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert]),
                                        as: AuthorizationResult.self)
            var bystanders: [Bystander] = []
            for i in 0..<4 { bystanders.append(try await Bystander(socket: d.socket, app: "org.interlude.torture.Bystander\(i)", interval: 0.01)) }
            await sleep(0.5)
            rss.before = d.residentBytes
            let sampler = RSSSampler(pid: d.pid)

            // Phase 1: the flood alone.
            bystanders.forEach { $0.setPhase(1) }
            await flood(producer, phase: 1, book: &floodBook)
            // Phase 2: the same flood with subscribers that never read.
            let slow = try (0..<ctx.slowConsumers).map { _ in try SlowConsumer(socket: d.socket, app: floodApp) }
            await sleep(0.3)
            bystanders.forEach { $0.setPhase(2) }
            await flood(producer, phase: 2, book: &floodBook)
            bystanders.forEach { $0.setPhase(3) }
            let t0 = now()
            while slow.contains(where: { !$0.disconnected }) && now() - t0 < 3 { await sleep(0.05) }
            cut = slow.filter(\.disconnected).count
            drained = slow.map { $0.drain() }
            sampler.stop()
            rss.peak = sampler.peak
            for b in bystanders { await b.stop() }
            let alone = Stats(bystanders.flatMap { $0.latencies(phase: 1).sorted })
            let withSlow = Stats(bystanders.flatMap { $0.latencies(phase: 2).sorted })
            p99 = (alone.quantile(0.99), withSlow.quantile(0.99))
            bystanderLost = bystanders.reduce(0) { $0 + $1.result.unanswered }
            problems += bystanders.flatMap { $0.result.unansweredExamples }.map { "bystander: \($0)" }
            await sleep(1)
            rss.after = d.residentBytes
            _ = d.checkAlive("during the slow-consumer row")
        } catch {
            problems.append("stopped: \(error)")
        }
        daemon?.stop()
        let crashes = daemon?.crashes ?? []
        problems += crashes
        let notCut = ctx.slowConsumers - cut
        if notCut > 0 { problems.append("\(notCut) of \(ctx.slowConsumers) slow consumers still connected 3 s after the flood") }
        let bound = 64 << 20 + 2 * ctx.slowConsumers * maxOutputBytes
        if let b = rss.before, let p = rss.peak, p - b > bound {
            problems.append("daemon grew \(mb(p - b)) (bound \(mb(bound)))")
        }
        if let a = p99.alone, let s = p99.slow, s > 3 * a + 0.05 {
            problems.append("bystanders' status p99 \(ms(s)) with slow consumers against \(ms(a)) without (bound 3× + 50 ms)")
        }
        if floodBook.unanswered > 0 { problems.append("\(floodBook.unanswered) flood requests unanswered") }
        let perConsumer = notificationsPerPhase * bodyBytes
        return TortureRow(
            name: "slow consumers (never read) while events flow",
            tried: "\(ctx.slowConsumers) subscribers × \(notificationsPerPhase) events of \(bodyBytes / 1024) KiB (≈ \(mb(perConsumer)) each); 4 bystanders",
            failed: notCut + bystanderLost + floodBook.unanswered,
            figures: "\(cut)/\(ctx.slowConsumers) cut (maxOutputBytes \(maxOutputBytes / 1024) KiB; each had received ≤ \(drained.max().map { "\($0 / 1024) KiB" } ?? "–") before the cut); "
                + "daemon RSS \(mb(rss.before)) → peak \(mb(rss.peak)) → \(mb(rss.after)); bystanders' status p99 \(ms(p99.alone)) without, "
                + "\(ms(p99.slow)) with slow consumers; daemon crashes \(crashes.count)",
            problems: problems)
    }
}
