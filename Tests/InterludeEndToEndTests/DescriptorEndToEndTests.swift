import Foundation
import Testing
import InterludeTestSupport
import InterludeWire

/// The daemon closes only the descriptors it holds.
///
/// A descriptor closed twice is a bug that shows only now and then: between the two closes another
/// thread can get the same number from `socket()` or `open()`, and the second close closes *its*
/// file. Seen in CI: a restart over a stale socket (`UnixSocket.connect`, probing whether another
/// daemon listens, closed its socket twice when the connect failed) closed the number the MQTT
/// thread had just taken, and the daemon's own listening socket ended up closed under it
/// ("cannot listen: listen: Bad file descriptor", exit 1). The same bug could close a client's
/// connection or the database's file.
///
/// The second close of a number nobody took in between fails with EBADF, every time, so the race
/// need not be won to see it; so does libdispatch's unregistration (`epoll_ctl(EPOLL_CTL_DEL)`)
/// of a source whose descriptor was closed before the source was off it (the sd-bus connections
/// did that at each stop). The daemon runs under `strace -f -Z -e trace=close,epoll_ctl` (failed
/// calls only, each with its stack) through a stale socket at start, CLI clients, a malformed and an
/// oversized request, sounds (a good one, a missing file, a file that is not audio), remote
/// messages from the broker, `notify-send` over D-Bus, a reload and a stop; no close may fail.
@Suite(.serialized) struct DescriptorEndToEndTests {
    static let strace = "/usr/bin/strace"

    static func required() -> Bool {
        guard TestBroker.both(), BusEndToEndTests.required() else { return false }
        let present = FileManager.default.isExecutableFile(atPath: strace)
        if !present, ProcessInfo.processInfo.environment["CI"] == "true" {
            Issue.record("strace missing (apt-get install strace): the descriptor test may not skip under CI")
        }
        return present
    }

    /// Leaves a socket file at `path` that nothing listens on, as a daemon killed with SIGKILL does.
    static func plantStaleSocket(_ path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(try UnixSocket.attach(fd, to: path, listen: true) == 0, "bind \(path): \(String(cString: strerror(errno)))")
    }

    /// The process id of the traced daemon: the child of `strace`.
    static func tracedChild(of tracer: Int32) -> Int32? {
        let text = (try? String(contentsOfFile: "/proc/\(tracer)/task/\(tracer)/children", encoding: .utf8)) ?? ""
        return text.split(separator: " ").first.flatMap { Int32($0) }
    }

    @Test(.enabled(if: required()))
    func theDaemonNeverClosesADescriptorItDoesNotHold() async throws {
        let bus = try PrivateBus("e2e-fds")
        defer { bus.stop() }
        let app = "org.example.Fds\(getpid())"
        let d = try RemoteEndToEndTests.Device("fds", device: "device-16", arguments: ["--bus"])
        defer { d.work.remove() }
        let trace = d.work.path + "/strace.txt"
        d.launcher = [Self.strace, "-f", "-qq", "-Z", "-k", "-o", trace, "-e", "trace=close,epoll_ctl"]
        d.environment = d.work.environment.merging(bus.environment) { _, bus in bus }  // its sound folder, the private bus
        try Self.plantStaleSocket(d.work.socket)
        try d.start()
        // A test that fails half-way leaves no daemon (strace does not pass SIGKILL on).
        defer { if let t = d.process?.pid, let c = Self.tracedChild(of: t) { kill(c, SIGKILL) }; d.kill9() }
        d.waitConnected()
        d.expectRunning("after its start over a stale socket")
        guard let tracer = d.process?.pid, let daemon = Self.tracedChild(of: tracer) else {
            Issue.record("no daemon under strace; its log:\n\(d.log)")
            return
        }

        // CLI clients, and remote messages through the broker.
        try d.optIn(app)
        let lines = (0..<20).map { "{\"id\":\"fd-\(getpid())-\($0)\",\"app\":\"\(app)\",\"title\":\"t\(($0))\",\"thread\":\"t\($0 % 3)\"}" }
        let pushed = try RemoteEndToEndTests.push(d.device, ["--stdin"], stdin: lines.joined(separator: "\n") + "\n")
        #expect(pushed.status == 0, "\(pushed.err)")
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, d.deliveries(app).count < lines.count { try await Task.sleep(nanoseconds: 50_000_000) }
        #expect(d.deliveries(app).count == lines.count, "remote messages delivered: \(d.deliveries(app).count) of \(lines.count)")

        // D-Bus notifications with a sound.
        for i in 0..<3 {
            let r = try await bus.exec("/usr/bin/notify-send", ["-a", "org.example.Bus\(i)", "-h", "string:sound-name:message-new-instant", "hello \(i)"])
            #expect(r.status == 0, "\(r)")
        }

        // A malformed request, then one over the 64 KiB line cap (tooLarge, the connection closed).
        let fd = try UnixSocket.connect(d.work.socket)
        func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
        func receive(until text: String) -> String {
            var buffer = [UInt8](repeating: 0, count: 65536), got: [UInt8] = []
            while !String(decoding: got, as: UTF8.self).contains(text) {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                got += buffer[0..<n]
            }
            return String(decoding: got, as: UTF8.self)
        }
        send(Array("{\"id\":1,\"method\":\n".utf8))
        let malformed = receive(until: "badRequest")
        #expect(malformed.contains("badRequest"), "\(malformed)")
        send([UInt8](repeating: 0x78, count: 200_000))
        let oversized = receive(until: "tooLarge")
        #expect(oversized.contains("tooLarge"), "\(oversized)")
        close(fd)

        // Sounds: one that plays, a missing file, a file that is not audio.
        let notAudio = d.work.sounds + "/not-audio.wav"
        try "not a sound".write(toFile: notAudio, atomically: true, encoding: .utf8)
        for (sound, code) in [("message-new-instant", nil), (d.work.sounds + "/missing.wav", "[soundNotFound]"), (notAudio, "[soundNotAudio]")] {
            // A sound that cannot be played is warned about and the default is played instead.
            let r = try RemoteEndToEndTests.interlude(["--socket", d.work.socket, "play", sound])
            #expect(r.status == 0 && (code.map { r.err.contains($0) } ?? r.err.isEmpty), "play \(sound): \(r.status) \(r.err)")
        }
        let reload = try RemoteEndToEndTests.interlude(["--socket", d.work.socket, "reload"])
        #expect(reload.status == 0, "\(reload.err)")
        d.expectRunning("after the clients")

        // The stop: SIGTERM to the daemon (strace holds its own), then strace ends with it.
        kill(daemon, SIGTERM)
        let exit = d.process?.wait(timeout: 30)
        #expect(exit != nil, "the daemon did not stop within 30 s of SIGTERM")
        d.process = nil
        let failed = ((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "").split(separator: "\n", omittingEmptySubsequences: false)
        var report: [String] = []
        // A close of a closed number, or libdispatch unregistering one (a source whose descriptor was
        // closed before the source was off it: the number's next file loses its watch).
        for (i, line) in failed.enumerated() where (line.contains("close(") || line.contains("epoll_ctl(")) && line.contains("EBADF") {
            report.append(String(line))
            // The stack strace printed under it (lines starting " > ").
            report += failed[(i + 1)...].prefix { $0.hasPrefix(" > ") }.prefix(12).map(String.init)
        }
        #expect(report.count == 0, "closes of descriptors the daemon did not hold, or sources left on closed ones:\n\(report.joined(separator: "\n"))")
        for line in report { print("[failure detail] \(line)") }
        #expect(d.log.contains("listening on"), "\(d.log)")
    }
}
