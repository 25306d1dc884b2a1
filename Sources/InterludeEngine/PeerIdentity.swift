#if canImport(Glibc)
import Glibc
#endif

/// What the daemon knows of a connection's peer process, read once, synchronously, when the
/// connection is accepted (N3: entitlements are bound to the connection, not to whatever runs
/// under the pid later). See ``ProcPeerVerifier`` for how it is checked again.
public struct PeerIdentity: Sendable, Equatable {
    /// The pid `SO_PEERCRED` gave: the process that called `connect(2)`.
    public var pid: Int32
    /// `/proc/PID/exe` at accept time; nil if it could not be read (the process was gone).
    public var executable: String?
    /// Field 22 of `/proc/PID/stat` (clock ticks after boot) at accept time: with the pid, names
    /// one process for the life of the machine (a reused pid has another start time).
    public var startTime: UInt64?
    /// The inode of the daemon's end of the connection (`fstat`): its peer end is what the peer
    /// process must hold.
    public var socketInode: UInt64?
    /// Whether the peer had already sent bytes when its executable was read: they may have been
    /// written by the code that ran before an exec of the entitled binary (connect, write, exec),
    /// which no later look at the process can tell apart. Such a connection is not trusted (N3).
    public var spokeBeforeIdentified: Bool

    public init(pid: Int32, executable: String? = nil, startTime: UInt64? = nil, socketInode: UInt64? = nil,
                spokeBeforeIdentified: Bool = false) {
        self.pid = pid
        self.executable = executable
        self.startTime = startTime
        self.socketInode = socketInode
        self.spokeBeforeIdentified = spokeBeforeIdentified
    }

    /// Reads the identity of the peer of the accepted socket `fd` (pid from `SO_PEERCRED`). Cheap:
    /// a readlink, one small read and an fstat; call it before the first await, so that no exec
    /// of the peer can come between the accept and the read unnoticed by ``ProcPeerVerifier``.
    public static func read(pid: Int32, fd: Int32) -> PeerIdentity {
        var st = stat()
        let inode: UInt64? = fstat(fd, &st) == 0 ? UInt64(st.st_ino) : nil
        let exe = ProcFS.executable(pid), start = ProcFS.startTime(pid)
        // After the executable is read: a byte queued now was written before that read, maybe
        // before an exec that the read already saw.
        var byte: UInt8 = 0
        let queued = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) > 0
        return PeerIdentity(pid: pid, executable: exe, startTime: start, socketInode: inode, spokeBeforeIdentified: queued)
    }
}

/// Port: decides, at an entitlement check (N3), whether the peer of a connection is still the
/// process that connected and runs the code its executable says.
public protocol PeerVerifying: Sendable {
    /// Nil when the peer may be trusted as its executable; else why not, for the decision's note.
    func problem(with peer: PeerIdentity) -> String?
}

/// The real check, from `/proc` (Linux). A peer is not trusted as its executable when:
/// - its process is gone, or its pid now names another process (another start time);
/// - it sent bytes before the daemon read its executable at accept time (they may come from the
///   code that ran before an exec: connect, write, exec the entitled binary); a client that waits
///   for the greeting, as the client library's `connect` does, is never in this case;
/// - its executable changed since the connection was accepted (an exec after connect);
/// - it runs in another mount namespace than the daemon (where any file can be at the entitled
///   path: `unshare -rm` and a bind mount need no privilege);
/// - another process holds the peer's end of the connection, or the peer itself no longer does
///   (fork, connect in the child, exec the entitled binary in it, speak from the parent: issue 7
///   hole 10), found by asking the kernel for the peer socket (`sock_diag`) and looking through
///   `/proc/*/fd`; if the kernel cannot say, the peer is not trusted;
/// - its environment (`/proc/PID/environ`, what the dynamic loader read at exec) sets
///   `LD_PRELOAD`, `LD_LIBRARY_PATH` or `LD_AUDIT`: code of someone else's choosing runs in it;
/// - it is being traced (`TracerPid` in `/proc/PID/status`: a debugger or ptrace injection);
/// - it has executable code mapped from a file outside the system folders (`/usr`, `/lib*`,
///   `/opt`, `/nix/store`, `/snap`) and the executable's own folder (and its `../lib`), or from a
///   deleted file or a memfd (`/proc/PID/maps`).
/// What a process of the same user can still do is in SECURITY.md.
public struct ProcPeerVerifier: PeerVerifying {
    public init() {}

    /// Folders whose shared objects a peer may map (besides its executable's own folder).
    public static let systemFolders = ["/usr/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/opt/", "/nix/store/", "/snap/"]

    public func problem(with peer: PeerIdentity) -> String? {
        let pid = peer.pid
        guard pid > 0, let exe = peer.executable, let start = peer.startTime else {
            return "the peer process could not be identified when it connected"
        }
        guard let nowStart = ProcFS.startTime(pid), nowStart == start else {
            return "the peer process (pid \(pid)) is gone since it connected"
        }
        guard let nowExe = ProcFS.executable(pid), nowExe == exe else {
            return "the peer process (pid \(pid)) is no longer \(exe) (an exec since it connected)"
        }
        if peer.spokeBeforeIdentified {
            return "the peer sent its first request before the daemon's greeting (wait for the greeting: the bytes may predate an exec)"
        }
        guard let ns = ProcFS.readLink("/proc/\(pid)/ns/mnt"), ns == ProcFS.readLink("/proc/self/ns/mnt") else {
            return "the peer runs in another mount namespace, where its executable's path proves nothing"
        }
        if let holders = Self.holders(of: peer) {
            let others = holders.subtracting([pid])
            if let other = others.min() {
                return "another process (pid \(other)) holds the peer's end of the connection"
            }
            if !holders.contains(pid) { return "the peer process (pid \(pid)) no longer holds its end of the connection" }
        } else {
            return "the kernel could not name the peer's end of the connection (sock_diag)"
        }
        let environment = ProcFS.environment(pid)
        guard let environment else { return "the peer's environment cannot be read" }
        for key in ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"] where environment[key].map({ !$0.isEmpty }) == true {
            return "the peer runs with \(key) set (code not of its executable)"
        }
        if let tracer = ProcFS.tracer(pid), tracer != 0 { return "the peer is being traced (ptrace, pid \(tracer))" }
        if let foreign = Self.foreignCode(pid: pid, executable: exe) {
            return "the peer has code mapped from \(foreign), outside the system folders"
        }
        return nil
    }

    /// The pids of the processes that hold the peer's end of the connection, or nil when the
    /// kernel does not name it.
    static func holders(of peer: PeerIdentity) -> Set<Int32>? {
        guard let ours = peer.socketInode, let theirs = SocketDiag.peerInode(of: UInt32(truncatingIfNeeded: ours)) else { return nil }
        return ProcFS.processes(holding: "socket:[\(theirs)]")
    }

    /// The first file-backed executable mapping of `pid` outside the allowed folders, if any.
    static func foreignCode(pid: Int32, executable: String) -> String? {
        guard let maps = ProcFS.readSmall("/proc/\(pid)/maps", limit: 16 << 20) else { return "an unreadable memory map" }
        let exeFolder = executable.split(separator: "/").dropLast().joined(separator: "/")
        let own = ["/" + exeFolder + "/", "/" + exeFolder.split(separator: "/").dropLast().joined(separator: "/") + "/lib/"]
        for line in maps.split(separator: "\n") {
            // address perms offset dev inode path
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count == 6, fields[1].contains("x") else { continue }
            let path = fields[5].trimmingLeadingSpaces
            guard path.hasPrefix("/") || path.hasPrefix("memfd:") else { continue }  // [vdso], anonymous JIT code
            if path.hasSuffix(" (deleted)") || path.hasPrefix("/memfd:") || path.hasPrefix("memfd:") { return path }
            if path == executable { continue }
            if Self.systemFolders.contains(where: { path.hasPrefix($0) }) || own.contains(where: { path.hasPrefix($0) }) { continue }
            return path
        }
        return nil
    }
}

extension Substring {
    var trimmingLeadingSpaces: String { String(drop { $0 == " " }) }
}

/// Small readers of `/proc` (Linux procfs).
enum ProcFS {
    /// `/proc/PID/exe`'s target.
    static func executable(_ pid: Int32) -> String? { readLink("/proc/\(pid)/exe") }

    /// Field 22 (`starttime`) of `/proc/PID/stat`. The command name (field 2) may hold spaces and
    /// parentheses: fields are counted after its last `)`.
    static func startTime(_ pid: Int32) -> UInt64? {
        guard let stat = readSmall("/proc/\(pid)/stat", limit: 4096), let close = stat.lastIndex(of: ")") else { return nil }
        let rest = stat[stat.index(after: close)...].split(separator: " ")
        // rest[0] is field 3 (state); starttime is field 22.
        guard rest.count > 19 else { return nil }
        return UInt64(rest[19])
    }

    /// `TracerPid` from `/proc/PID/status`.
    static func tracer(_ pid: Int32) -> Int32? {
        guard let status = readSmall("/proc/\(pid)/status", limit: 16384) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("TracerPid:") {
            return Int32(line.dropFirst("TracerPid:".count).trimmingCharacters)
        }
        return nil
    }

    /// The environment the process's current executable started with.
    static func environment(_ pid: Int32) -> [String: String]? {
        guard let raw = readSmall("/proc/\(pid)/environ", limit: 4 << 20) else { return nil }
        var out: [String: String] = [:]
        for entry in raw.split(separator: "\0") {
            guard let eq = entry.firstIndex(of: "=") else { continue }
            out[String(entry[..<eq])] = String(entry[entry.index(after: eq)...])
        }
        return out
    }

    /// The pids whose open files include `target` (a readlink of `/proc/PID/fd/N`, e.g.
    /// `socket:[123]`). Processes whose fds cannot be read (another user's) are skipped.
    static func processes(holding target: String) -> Set<Int32> {
        var found: Set<Int32> = []
        guard let proc = opendir("/proc") else { return found }
        defer { closedir(proc) }
        while let entry = readdir(proc) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = Int32(name) else { continue }
            guard let fds = opendir("/proc/\(pid)/fd") else { continue }
            while let fd = readdir(fds) {
                let n = withUnsafeBytes(of: fd.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                guard n.first?.isNumber == true else { continue }
                if readLink("/proc/\(pid)/fd/\(n)") == target { found.insert(pid); break }
            }
            closedir(fds)
        }
        return found
    }

    static func readLink(_ path: String) -> String? {
        var buf = [CChar](repeating: 0, count: 4097)
        let n = readlink(path, &buf, 4096)
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A whole procfs file (they report size 0, so read until EOF), at most `limit` bytes.
    static func readSmall(_ path: String, limit: Int) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while out.count < limit {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { break }
            out += buf[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension Substring {
    var trimmingCharacters: String { String(self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed()) }
}

/// The kernel's socket diagnostics (`NETLINK_SOCK_DIAG`, `linux/unix_diag.h`) for one question: the
/// inode of the other end of a connected Unix socket.
enum SocketDiag {
    static let netlinkSockDiag: Int32 = 4      // NETLINK_SOCK_DIAG
    static let sockDiagByFamily: UInt16 = 20   // SOCK_DIAG_BY_FAMILY
    static let nlmFRequest: UInt16 = 1         // NLM_F_REQUEST
    static let nlmsgError: UInt16 = 2          // NLMSG_ERROR
    static let udiagShowPeer: UInt32 = 4       // UDIAG_SHOW_PEER
    static let unixDiagPeer: UInt16 = 2        // UNIX_DIAG_PEER

    /// The inode of the peer of the Unix socket with inode `inode`, or nil.
    static func peerInode(of inode: UInt32) -> UInt32? {
        let fd = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkSockDiag)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var tv = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        // struct nlmsghdr (16 bytes) + struct unix_diag_req (24 bytes).
        var req = [UInt8](repeating: 0, count: 40)
        func put16(_ v: UInt16, _ at: Int) { withUnsafeBytes(of: v.littleEndian) { for (i, b) in $0.enumerated() { req[at + i] = b } } }
        func put32(_ v: UInt32, _ at: Int) { withUnsafeBytes(of: v.littleEndian) { for (i, b) in $0.enumerated() { req[at + i] = b } } }
        put32(40, 0)                      // nlmsg_len
        put16(sockDiagByFamily, 4)        // nlmsg_type
        put16(nlmFRequest, 6)             // nlmsg_flags
        put32(1, 8)                       // nlmsg_seq
        req[16] = UInt8(AF_UNIX)          // sdiag_family
        put32(0xffff_ffff, 20)            // udiag_states: any
        put32(inode, 24)                  // udiag_ino
        put32(udiagShowPeer, 28)          // udiag_show
        put32(0xffff_ffff, 32)            // udiag_cookie: none
        put32(0xffff_ffff, 36)
        let sent = req.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        guard sent == req.count else { return nil }
        var buf = [UInt8](repeating: 0, count: 8192)
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n >= 32 else { return nil }
        func get16(_ at: Int) -> UInt16 { UInt16(buf[at]) | UInt16(buf[at + 1]) << 8 }
        func get32(_ at: Int) -> UInt32 { UInt32(buf[at]) | UInt32(buf[at + 1]) << 8 | UInt32(buf[at + 2]) << 16 | UInt32(buf[at + 3]) << 24 }
        let length = min(Int(get32(0)), n)
        guard get16(4) == sockDiagByFamily, length >= 32, get32(16 + 4) == inode else { return nil }
        // struct unix_diag_msg is 16 bytes; attributes (struct rtattr: len, type) follow, 4-aligned.
        var at = 32
        while at + 4 <= length {
            let len = Int(get16(at)), type = get16(at + 2)
            guard len >= 4, at + len <= length else { return nil }
            if type == unixDiagPeer, len >= 8 { return get32(at + 4) }
            at += (len + 3) & ~3
        }
        return nil
    }
}
