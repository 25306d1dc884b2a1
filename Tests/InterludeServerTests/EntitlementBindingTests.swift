import Foundation
import Testing
import InterludeClient
import InterludeEngine
import InterludeTestSupport
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// Issue 7, hole 10 (N3): a critical-alert entitlement bound to an executable path is bound to the
/// connection's peer as it was when the connection was accepted, and re-checked at each critical
/// request (ProcPeerVerifier). Real processes: a small C peer compiled here with the toolchain's
/// clang plays the entitled binary (`alarm`) and the attacker (`attack`, the same code at
/// another path, not entitled).
@Suite(.serialized) struct EntitlementBindingTests {
    struct Peers {
        let attack: String
        let alarm: String
        let inject: String
        /// The folder they were compiled in; removed by the test that built them.
        var folder: String { URL(fileURLWithPath: attack).deletingLastPathComponent().deletingLastPathComponent().path }
        func remove() { try? FileManager.default.removeItem(atPath: folder) }
    }

    /// Compiles the peer (twice: the attacker and the entitled stand-in) and the injected library.
    static func build() throws -> Peers {
        let dir = NSTemporaryDirectory() + "interlude-peers-\(UUID().uuidString.prefix(8))"
        for sub in ["attack", "alarm", "inject"] {
            try FileManager.default.createDirectory(atPath: dir + "/" + sub, withIntermediateDirectories: true)
        }
        let source = dir + "/peer.c"
        try peerSource.write(toFile: source, atomically: true, encoding: .utf8)
        let clang = try compiler()
        let peers = Peers(attack: dir + "/attack/peer", alarm: dir + "/alarm/alarm", inject: dir + "/inject/inject.so")
        for (out, extra) in [(peers.attack, [String]()), (peers.alarm, []), (peers.inject, ["-DINJECT", "-shared", "-fPIC"])] {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: clang)
            p.arguments = ["-O1", "-o", out, source] + extra
            try p.run()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { throw CompileError(description: "\(clang) failed for \(out)") }
        }
        return peers
    }

    struct CompileError: Error, CustomStringConvertible { var description: String }

    /// The C compiler: the Swift toolchain's clang (beside `swift` on PATH), else cc or clang.
    static func compiler() throws -> String {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        let candidates = path.map { $0 + "/clang" } + ["/opt/swift/usr/bin/clang"] + path.map { $0 + "/cc" }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw CompileError(description: "no C compiler (clang or cc) on PATH")
        }
        return found
    }

    /// Runs a peer to its end; returns its stdout. Waits without blocking a thread the in-process
    /// daemon needs.
    func run(_ exe: String, _ args: [String], environment: [String: String] = ["PATH": "/usr/bin:/bin"]) async throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        p.environment = environment
        let out = Pipe()
        p.standardOutput = out
        let done = AsyncStream<Void> { c in p.terminationHandler = { _ in c.yield(); c.finish() } }
        try p.run()
        for await _ in done { break }
        return String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    /// The decision in the peer's reply line to its critical `notification.add`.
    func decision(_ output: String) -> (level: String?, notes: String, rules: [String]) {
        let line = output.split(separator: "\n").last.map(String.init) ?? ""
        let json = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        let d = (json?["result"] as? [String: Any])?["decision"] as? [String: Any]
        return (d?["level"] as? String, ((d?["notes"] as? [String]) ?? []).joined(separator: "; "), (d?["rules"] as? [String]) ?? [])
    }

    func daemon(_ peers: Peers) throws -> TestDaemon {
        try TestDaemon(overlay: """
            {"authorization": {"default": "grant"},
             "entitledCriticalApps": [{"app": "org.example.Alarm", "executablePath": "\(peers.alarm)"}]}
            """)
    }

    @Test func N3_theEntitledBinaryItselfGetsItsCriticalAlert() async throws {
        let peers = try Self.build()
        defer { peers.remove() }
        let d = try daemon(peers)
        let r = decision(try await run(peers.alarm, ["direct", d.socket]))
        #expect(r.level == "critical", "\(r)")
        let attacker = decision(try await run(peers.attack, ["direct", d.socket]))
        #expect(attacker.level == "active", "another executable is not entitled: \(attacker)")
    }

    /// The attack of issue 7: fork, the child connects and execs the entitled binary, the parent
    /// keeps the socket and asks. `early`: the exec comes before the daemon's greeting is read
    /// (it may beat the accept); `late`: after it.
    @Test(arguments: ["early", "late"])
    func N3_forkConnectExecTheEntitledBinaryIsNotEntitled(mode: String) async throws {
        let peers = try Self.build()
        defer { peers.remove() }
        let d = try daemon(peers)
        for _ in 0..<3 {
            let r = decision(try await run(peers.attack, ["fork-exec", d.socket, peers.alarm, mode]))
            #expect(r.level == "active", "\(mode): \(r)")
            #expect(r.rules.contains("N3"))
            #expect(r.notes.contains("the peer is not entitled to critical alerts"), "\(r.notes)")
        }
    }

    /// The attack's one order no look at the process can see: the child connects, writes its
    /// request and execs the entitled binary, all before the daemon accepts. Reproduced on a socket
    /// of the test's own that accepts only after the exec, checked with the daemon's code
    /// (PeerIdentity.read at accept, then ProcPeerVerifier): the bytes came before the peer was
    /// identified, so it is not trusted. A peer that waits for the greeting is.
    @Test func N3_bytesSentBeforeTheAcceptAndThenAnExecAreNotTrusted() async throws {
        let peers = try Self.build()
        defer { peers.remove() }
        let path = NSTemporaryDirectory() + "interlude-accept-\(UUID().uuidString.prefix(8)).sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #expect(try UnixSocket.attach(listener, to: path, listen: true) == 0)
        #expect(listen(listener, 4) == 0)
        defer { close(listener); unlink(path) }
        let out = try await run(peers.attack, ["fork-exec", path, peers.alarm, "write"])
        let child = try #require(Int32(out.trimmingCharacters(in: .whitespacesAndNewlines)), "the attacker printed the child's pid: \(out)")
        defer { kill(child, SIGKILL) }
        let fd = accept(listener, nil, nil)
        #expect(fd >= 0)
        defer { close(fd) }
        let peer = PeerIdentity.read(pid: child, fd: fd)
        #expect(peer.executable == peers.alarm, "the exec came before the accept")
        #expect(peer.spokeBeforeIdentified)
        let problem = ProcPeerVerifier().problem(with: peer)
        #expect(problem?.contains("before the daemon's greeting") == true, "\(problem ?? "trusted")")

        // The same entitled binary, waiting for the greeting: trusted (all the other checks pass).
        let legit = Process()
        legit.executableURL = URL(fileURLWithPath: peers.alarm)
        legit.arguments = ["direct", path]
        legit.environment = ["PATH": "/usr/bin:/bin"]
        legit.standardOutput = FileHandle.nullDevice
        try legit.run()
        defer { kill(legit.processIdentifier, SIGKILL) }
        let fd2 = accept(listener, nil, nil)
        defer { close(fd2) }
        let clean = PeerIdentity.read(pid: legit.processIdentifier, fd: fd2)
        #expect(!clean.spokeBeforeIdentified)
        #expect(ProcPeerVerifier().problem(with: clean) == nil)
    }

    @Test func N3_LD_PRELOADIntoTheEntitledBinaryIsNotEntitled() async throws {
        let peers = try Self.build()
        defer { peers.remove() }
        let d = try daemon(peers)
        let r = decision(try await run(peers.alarm, ["sleep"], environment: [
            "PATH": "/usr/bin:/bin", "LD_PRELOAD": peers.inject, "PEER_INJECT_SOCKET": d.socket,
        ]))
        #expect(r.level == "active", "\(r)")
        #expect(r.notes.contains("LD_PRELOAD"), "\(r.notes)")
    }

    /// The C source of the peer.
    static let peerSource = #"""
// A peer for the N3 entitlement tests (issue 7 hole 10), compiled by the test.
//   peer direct SOCKET                 connect and ask for a critical alert
//   peer fork-exec SOCKET EXE MODE     fork; the child connects, then execs EXE ("EXE sleep");
//                                      the parent keeps the socket and asks. MODE: early (exec
//                                      before the daemon's greeting is read) or late (after);
//                                      write: the child writes the requests itself, then execs,
//                                      and the parent closes its copy, prints the child's pid
//                                      once the exec is done and exits
//   peer sleep                         sleep 10 s (the entitled binary's stand-in)
// Built with -DINJECT -shared: a constructor that runs "direct" on $PEER_INJECT_SOCKET.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int connect_to(int fd, const char *path) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    return connect(fd, (struct sockaddr *)&a, sizeof a);
}

static char buf[1 << 20];
static size_t have;

/* Reads one line into out (NUL-terminated, without the newline); returns 0 on EOF. */
static int read_line(int fd, char *out, size_t cap) {
    for (;;) {
        char *nl = memchr(buf, '\n', have);
        if (nl) {
            size_t n = (size_t)(nl - buf);
            if (n >= cap) n = cap - 1;
            memcpy(out, buf, n);
            out[n] = 0;
            have -= (size_t)(nl - buf) + 1;
            memmove(buf, nl + 1, have);
            return 1;
        }
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r <= 0) return 0;
        have += (size_t)r;
    }
}

static void say(int fd, const char *s) { (void)!write(fd, s, strlen(s)); }

/* hello, authorization, a critical notification; prints the add reply on stdout. */
static int ask(int fd, int greeted) {
    static char line[1 << 20];
    if (!greeted && !read_line(fd, line, sizeof line)) return 1;
    say(fd, "{\"id\":1,\"method\":\"hello\",\"params\":{\"app\":\"org.example.Alarm\"}}\n"
            "{\"id\":2,\"method\":\"notification.requestAuthorization\",\"params\":{\"options\":[\"alert\",\"sound\",\"criticalAlert\"]}}\n"
            "{\"id\":3,\"method\":\"notification.add\",\"params\":{\"identifier\":\"wake\",\"title\":\"Wake up\",\"level\":\"critical\"}}\n");
    while (read_line(fd, line, sizeof line)) {
        if (strstr(line, "\"id\":3")) { printf("%s\n", line); fflush(stdout); return 0; }
    }
    return 1;
}

static int direct(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect_to(fd, path) != 0) { perror("connect"); return 1; }
    return ask(fd, 0);
}

#ifdef INJECT
__attribute__((constructor)) static void injected(void) {
    const char *path = getenv("PEER_INJECT_SOCKET");
    if (path) _exit(direct(path));
}
#else
static int exe_is(pid_t pid, const char *exe) {
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    return strcmp(target, exe) == 0;
}

static int fork_exec(const char *path, const char *exe, const char *mode) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    int ready[2], go[2];
    if (fd < 0 || pipe(ready) || pipe(go)) { perror("setup"); return 1; }
    pid_t child = fork();
    if (child < 0) { perror("fork"); return 1; }
    int write_first = strcmp(mode, "write") == 0;
    if (child == 0) {
        char c = 0;
        if (connect_to(fd, path) != 0) _exit(3);
        if (write_first) {
            /* Let go of whatever else we inherited (the test's pipes), so it sees our end. */
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            for (int i = 3; i < 1024; i++) if (i != fd && i != go[0] && i != ready[1]) close(i);
            say(fd, "{\"id\":1,\"method\":\"hello\",\"params\":{\"app\":\"org.example.Alarm\"}}\n");
        }
        (void)!write(ready[1], "c", 1);
        (void)!read(go[0], &c, 1);
        char *argv[] = {(char *)exe, "sleep", NULL};
        execv(exe, argv);
        _exit(4);
    }
    char c;
    if (read(ready[0], &c, 1) != 1) { fprintf(stderr, "the child did not connect\n"); return 1; }
    if (write_first) {
        close(fd);
        (void)!write(go[1], "g", 1);
        for (int i = 0; i < 2000 && !exe_is(child, exe); i++) usleep(1000);
        if (!exe_is(child, exe)) { fprintf(stderr, "the child did not exec %s\n", exe); return 1; }
        printf("%d\n", (int)child);
        return 0;
    }
    static char line[1 << 20];
    int late = strcmp(mode, "late") == 0;
    if (late && !read_line(fd, line, sizeof line)) return 1;  /* the daemon has accepted */
    (void)!write(go[1], "g", 1);
    for (int i = 0; i < 2000 && !exe_is(child, exe); i++) usleep(1000);
    if (!exe_is(child, exe)) { fprintf(stderr, "the child did not exec %s\n", exe); return 1; }
    int rc = ask(fd, late);
    kill(child, SIGKILL);  /* SIGTERM may be ignored, inherited from whoever started us */
    waitpid(child, NULL, 0);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "sleep") == 0) { sleep(10); return 0; }
    if (argc == 3 && strcmp(argv[1], "direct") == 0) return direct(argv[2]);
    if (argc == 5 && strcmp(argv[1], "fork-exec") == 0) return fork_exec(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: peer direct SOCKET | fork-exec SOCKET EXE early|late|write | sleep\n");
    return 2;
}
#endif
"""#
}
