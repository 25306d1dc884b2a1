// A load probe for one running interluded (issue 7 holes 5 and 6). Loopback only: it talks to the
// Unix socket it is given and to nothing else. Bounded: every socket has a 30 s send/receive
// timeout and every mode a fixed count. Built and run by Scripts/probe-connections.
//
//   connection-probe SOCKET malformed LINES BYTES [KIND]  one client pipelines LINES malformed lines
//                                                   of BYTES bytes without reading, then closes
//                                                   (KIND: string, array, params, method, utf8)
//   connection-probe SOCKET clients CLIENTS REQUESTS CLIENTS at once, each hello then REQUESTS
//                                                   `status` one after another; prints served,
//                                                   refused (by code), failed, p50/p99 latency
//   connection-probe SOCKET mix CLIENTS REQUESTS     the same with notification.add, status,
//                                                   notification.delivered, session.register in turn
//   connection-probe SOCKET unread REQUESTS         one client pipelines REQUESTS `status` and
//                                                   reads nothing for 2 s, then closes
import Foundation
#if canImport(Glibc)
import Glibc
#endif

func connectSocket(_ path: String) -> Int32? {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        for (i, b) in bytes.enumerated() { raw[i] = b }
        raw[bytes.count] = 0
    }
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else { close(fd); return nil }
    var tv = timeval(tv_sec: 30, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    return fd
}

func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { raw in
        var off = 0
        while off < raw.count {
            let n = send(fd, raw.baseAddress! + off, raw.count - off, Int32(MSG_NOSIGNAL))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            off += n
        }
        return true
    }
}

/// Reads lines from one socket.
final class LineReader {
    let fd: Int32
    var buffer: [UInt8] = []
    init(_ fd: Int32) { self.fd = fd }
    func line() -> String? {
        while true {
            if let nl = buffer.firstIndex(of: 0x0a) {
                let l = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeFirst(nl + 1)
                return l
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            buffer += chunk[0..<n]
        }
    }
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func hello(_ fd: Int32, _ app: String) -> Bool {
    sendAll(fd, Array(#"{"id":0,"method":"hello","params":{"app":"\#(app)"}}"#.utf8) + [0x0a])
}

let args = CommandLine.arguments
guard args.count >= 3 else { print("usage: connection-probe SOCKET MODE ..."); exit(2) }
let path = args[1]

switch args[2] {
case "malformed":
    let lines = Int(args[3])!, size = Int(args[4])!
    let kind = args.count > 5 ? args[5] : "string"
    guard let fd = connectSocket(path) else { print("cannot connect"); exit(1) }
    _ = hello(fd, "org.example.Probe")
    // Malformed, BYTES long: string = an object whose string never ends (badRequest); array = a
    // JSON array of numbers (not an object); params = status with params an array of numbers;
    // method = a method name of BYTES (unknownMethod); utf8 = invalid UTF-8 in a string.
    let n = max(0, size - 40)
    let body: [UInt8]
    switch kind {
    case "array": body = Array(("[" + String(repeating: "1,", count: n / 2) + "1]").utf8)
    case "params": body = Array((#"{"id":1,"method":"status","params":["# + String(repeating: "1,", count: n / 2) + "1]}").utf8)
    case "method": body = Array((#"{"id":1,"method":""# + String(repeating: "x", count: n) + #""}"#).utf8)
    case "utf8": body = Array(#"{"id":1,"method":""#.utf8) + [UInt8](repeating: 0xff, count: n) + Array(#""}"#.utf8)
    default: body = Array(("{\"id\":1,\"method\":\"" + String(repeating: "x", count: n)).utf8)
    }
    let line = body + [0x0a]
    let t0 = now()
    var sent = 0
    for _ in 0..<lines {
        guard sendAll(fd, line) else { break }
        sent += 1
    }
    print("malformed \(kind): sent \(sent) of \(lines) lines of \(line.count) bytes in \(String(format: "%.1f", now() - t0)) s without reading")
    close(fd)
case "unread":
    let count = Int(args[3])!
    guard let fd = connectSocket(path) else { print("cannot connect"); exit(1) }
    _ = hello(fd, "org.example.Probe")
    var batch: [UInt8] = []
    for i in 0..<count { batch += Array(#"{"id":\#(i + 1),"method":"status"}"#.utf8) + [0x0a] }
    let ok = sendAll(fd, batch)
    sleep(2)
    print("unread: sent \(count) status requests (\(ok ? "all written" : "write failed: the daemon closed or stopped reading"))")
    close(fd)
case "clients", "mix":
    let clients = Int(args[3])!, requests = Int(args[4])!
    // mix: after hello, notification.requestAuthorization, then in turn notification.add,
    // status, notification.delivered, session.register (audio and notification calls).
    let mix = args[2] == "mix"
    @Sendable func request(_ i: Int, _ c: Int) -> String {
        guard mix else { return #"{"id":\#(i + 1),"method":"status"}"# }
        switch i % 4 {
        case 0: return #"{"id":\#(i + 1),"method":"notification.add","params":{"identifier":"p\#(c)-\#(i)","title":"probe \#(i)","body":"a notification of the probe"}}"#
        case 1: return #"{"id":\#(i + 1),"method":"status"}"#
        case 2: return #"{"id":\#(i + 1),"method":"notification.delivered"}"#
        default: return #"{"id":\#(i + 1),"method":"session.register","params":{"category":"ambient"}}"#
        }
    }
    final class Tally: @unchecked Sendable {
        let lock = NSLock()
        var latencies: [Double] = []
        var served = 0, failed = 0
        var refused: [String: Int] = [:]
        func withLock(_ f: (Tally) -> Void) { lock.lock(); f(self); lock.unlock() }
    }
    let tally = Tally()
    let start = DispatchSemaphore(value: 0)
    let group = DispatchGroup()
    var threads: [Thread] = []
    for c in 0..<clients {
        group.enter()
        let t = Thread {
            defer { group.leave() }
            start.wait()
            guard let fd = connectSocket(path) else { tally.withLock { $0.failed += 1 }; return }
            defer { close(fd) }
            let r = LineReader(fd)
            guard let greeting = r.line(), greeting.contains("greeting") || greeting.contains("protocol") else {
                tally.withLock { $0.failed += 1 }; return
            }
            _ = hello(fd, "org.example.Probe\(c)")
            guard let h = r.line() else { tally.withLock { $0.failed += 1 }; return }
            if h.contains("\"error\"") {
                let code = h.range(of: #""code":"[a-zA-Z]+""#, options: .regularExpression).map { String(h[$0].dropFirst(8).dropLast()) } ?? "?"
                tally.withLock { $0.refused[code, default: 0] += 1 }
                return
            }
            if mix {
                _ = sendAll(fd, Array(#"{"id":0,"method":"notification.requestAuthorization","params":{"options":["alert","sound"]}}"#.utf8) + [0x0a])
                guard let a = r.line(), a.contains("\"result\"") else { tally.withLock { $0.failed += 1 }; return }
            }
            var mine: [Double] = []
            for i in 0..<requests {
                let t0 = now()
                // An error reply is an answer too (an app not yet authorized gets notAuthorized).
                guard sendAll(fd, Array(request(i, c).utf8) + [0x0a]), let l = r.line(),
                      l.contains("\"result\"") || (mix && l.contains("\"error\"")) else {
                    tally.withLock { $0.failed += 1 }; return
                }
                mine.append(now() - t0)
            }
            tally.withLock { $0.served += 1; $0.latencies += mine }
        }
        threads.append(t)
        t.start()
    }
    let t0 = now()
    for _ in 0..<clients { start.signal() }
    group.wait()
    let wall = now() - t0
    let latencies = tally.latencies.sorted(), served = tally.served, failed = tally.failed, refused = tally.refused
    func pct(_ p: Double) -> String {
        latencies.isEmpty ? "-" : String(format: "%.1f ms", latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] * 1000)
    }
    let refusedText = refused.isEmpty ? "0" : refused.map { "\($0.value) \($0.key)" }.sorted().joined(separator: ", ")
    print("\(args[2]): \(clients) × \(requests) \(mix ? "mixed requests" : "status"): served \(served), refused \(refusedText), failed \(failed); "
        + "\(latencies.count) replies in \(String(format: "%.2f", wall)) s (\(Int(Double(latencies.count) / wall))/s), p50 \(pct(0.5)), p99 \(pct(0.99))")
default:
    print("unknown mode \(args[2])"); exit(2)
}
