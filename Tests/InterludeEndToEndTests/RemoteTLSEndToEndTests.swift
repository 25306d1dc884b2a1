import Foundation
import Testing
import InterludeRemote
import InterludeWire

/// A private mosquitto with a TLS listener only, on 127.0.0.1: a CA and a server certificate for
/// 127.0.0.1 and localhost made with openssl in the test's folder, and a second CA that signed
/// nothing of the broker's. Users `device-tls`, `device-wrong-ca` and `provider` with password files.
final class TLSBroker {
    static var installed: Bool {
        ["/usr/sbin/mosquitto", "/usr/bin/mosquitto_passwd", "/usr/bin/openssl"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }
    static func required() -> Bool {
        if installed { return true }
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            Issue.record("mosquitto or openssl is missing (Scripts/test installs them): the TLS test cannot run")
        }
        return false
    }

    let dir: String
    let port: Int
    var url: String { "mqtts://127.0.0.1:\(port)" }
    var ca: String { dir + "/ca.pem" }
    var wrongCA: String { dir + "/wrong-ca.pem" }
    func passwordFile(_ user: String) -> String { dir + "/\(user).password" }
    private let process = Process()

    @discardableResult
    static func sh(_ script: String) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-ec", script]
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        while p.isRunning { Thread.sleep(forTimeInterval: 0.02) }
        p.waitUntilExit()
        return p.terminationStatus
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func listening(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 } }
    }

    init(_ name: String) throws {
        dir = NSTemporaryDirectory() + "interlude-\(name)-\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let certs = """
        cd '\(dir)'
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=Interlude test CA' 2>/dev/null
        openssl req -x509 -newkey rsa:2048 -nodes -keyout wrong-ca.key -out wrong-ca.pem -days 2 -subj '/CN=Interlude test CA' 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj '/CN=localhost' 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n' > server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext 2>/dev/null
        : > passwd
        for u in provider device-tls device-wrong-ca; do
            head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \\n' > $u.password
            mosquitto_passwd -b passwd $u "$(cat $u.password)"
        done
        chmod 600 passwd *.key
        """
        guard try Self.sh(certs) == 0 else { throw CocoaError(.fileWriteUnknown) }
        var chosen = 0
        for _ in 0..<5 {
            let p = Int.random(in: 20000...60000)
            if Self.listening(p) { continue }
            chosen = p
            break
        }
        port = chosen
        try """
        listener \(port) 127.0.0.1
        cafile \(dir)/ca.pem
        certfile \(dir)/server.pem
        keyfile \(dir)/server.key
        allow_anonymous false
        password_file \(dir)/passwd
        persistence false
        log_dest file \(dir)/mosquitto.log
        log_type all
        set_tcp_nodelay true
        \(getuid() == 0 ? "user root" : "")
        """.write(toFile: dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/mosquitto")
        process.arguments = ["-c", dir + "/mosquitto.conf"]
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        for _ in 0..<100 {
            if (try? String(contentsOfFile: dir + "/mosquitto.log", encoding: .utf8))?.contains("Opening ipv4 listen socket on port \(port)") == true { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }
    var log: String { (try? String(contentsOfFile: dir + "/mosquitto.log", encoding: .utf8)) ?? "" }
    deinit {
        // SIGKILL: a child of the test process inherits its blocked SIGTERM (persistence is off).
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// Issue 11 item 6: the broker over TLS (`mqtts://`, `remote.caFile`). A push reaches the daemon
/// through mosquitto's TLS listener; a daemon given a CA that did not sign the broker's certificate
/// refuses the connection with a clear, stable error in its log (`[tlsFailed]`, OpenSSL's
/// "certificate verify failed"), keeps running and keeps retrying, and `interlude push` with that CA
/// exits 1 with the same words.
@Suite(.serialized) struct RemoteTLSEndToEndTests {
    typealias Device = RemoteEndToEndTests.Device
    static let noAudio = ["--pulse-server", "unix:\(NSTemporaryDirectory())interlude-no-audio-server-\(getpid())"]

    @Test(.enabled(if: TLSBroker.required()))
    func aPushOverTLSIsDeliveredAndAWrongCAIsRefused() async throws {
        let t0 = Date()
        func at() -> String { String(format: "%.1f s", Date().timeIntervalSince(t0)) }
        let broker = try TLSBroker("tls-broker")
        print("TLS: broker up at \(at())")
        let app = "org.example.Secure\(getpid())"
        let d = try Device("remote-tls", device: "device-tls", broker: broker.url, passwordFile: broker.passwordFile("device-tls"),
                           remoteConfig: ", caFile: \"\(broker.ca)\"", arguments: Self.noAudio)
        try d.start()
        d.waitConnected()
        #expect(d.connections == 1, "\(d.log)")
        try d.optIn(app)

        let r = try RemoteEndToEndTests.interlude(["push", "--broker", broker.url, "--ca-file", broker.ca, "--device", "device-tls",
                                                   "--username", "provider", "--password-file", broker.passwordFile("provider"),
                                                   "--app", app, "--title", "over TLS", "--wait-receipt"])
        #expect(r.status == 0, "\(r.out) \(r.err)")
        let receipt = r.out.split(separator: "\n").first.flatMap(RemoteEndToEndTests.receipt)
        #expect(receipt?.status == .delivered, "\(r.out)")
        print("TLS: pushed at \(at())")
        let center = try await d.center(app)
        #expect(center.map(\.title) == ["over TLS"])
        #expect(broker.log.contains("New client connected") && broker.log.contains("device-tls"), "\(broker.log)")

        // A CA that did not sign the broker's certificate: refused, said once with a stable code, retried.
        let wrong = try Device("remote-tls-wrong", device: "device-wrong-ca", broker: broker.url, passwordFile: broker.passwordFile("device-wrong-ca"),
                               remoteConfig: ", caFile: \"\(broker.wrongCA)\"", arguments: Self.noAudio)
        try wrong.start()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !wrong.log.contains("[tlsFailed]") { RemoteClusterEndToEndTests.pause(0.05) }
        RemoteClusterEndToEndTests.pause(3.5)  // the backoff retries (1 s, 2 s) happened meanwhile
        let log = wrong.log
        let lines = log.split(separator: "\n").filter { $0.contains("[tlsFailed]") }
        #expect(lines.count == 1, "the TLS failure is logged once while it repeats: \(log)")
        #expect(lines.first?.contains("cannot connect to \(broker.url)") == true && log.contains("certificate verify failed"), "\(log)")
        #expect(wrong.connections == 0, "\(log)")
        #expect(wrong.process?.isRunning == true, "the daemon keeps running: \(log)")
        // The retries (1 s, then 2 s, 4 s later) reach the broker: it logs each refused handshake.
        var attempts = 0
        let retried = Date().addingTimeInterval(10)
        while Date() < retried {
            // mosquitto says a refused handshake one of two ways, by where it failed: during the
            // first read ("OpenSSL Error[0]: … unknown ca"), or already at accept ("Client
            // connection from … failed: … unknown ca"); a CI run saw one of the first, three of the second.
            attempts = broker.log.split(separator: "\n").filter {
                $0.contains("OpenSSL Error") || ($0.contains("Client connection from") && $0.contains("failed"))
            }.count
            if attempts >= 2 { break }
            RemoteClusterEndToEndTests.pause(0.1)
        }
        #expect(attempts >= 2, "the daemon retries (the broker saw \(attempts) failed handshakes): \(broker.log)")
        // Its socket still answers: a TLS problem is not the daemon's end.
        let s = try RemoteEndToEndTests.interlude(["--socket", wrong.work.socket, "status"])
        #expect(s.status == 0, "\(s.err)")

        print("TLS: wrong CA checked at \(at())")
        let p = try RemoteEndToEndTests.interlude(["push", "--broker", broker.url, "--ca-file", broker.wrongCA, "--device", "device-tls",
                                                   "--username", "provider", "--password-file", broker.passwordFile("provider"),
                                                   "--app", app, "--title", "never", "--timeout", "5"])
        #expect(p.status == 1, "\(p.out) \(p.err)")
        #expect(p.err.contains("certificate verify failed") && p.err.contains("tlsFailed"), "\(p.err)")
        print("TLS: a push over mqtts:// delivered (\(receipt?.status.rawValue ?? "?")); a wrong CA refused: \(lines.first ?? "?"); the broker saw \(attempts) failed handshakes")
        print("TLS: wrong-CA push at \(at())")
        d.stop()
        wrong.stop()
        print("TLS: daemons stopped at \(at())")
    }
}
