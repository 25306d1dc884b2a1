import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's transport: a Unix-domain stream socket at a path (PROTOCOL.md "Transport").
/// One place that builds `sockaddr_un`, for the server, the client library and the tests.
public enum UnixSocket {
    /// Why a socket call failed: the call and the system's message (`strerror`).
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// The address of `path`.
    /// - Throws: ``Failure`` when the path does not fit `sun_path` (107 bytes on Linux).
    public static func address(_ path: String) throws -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            throw Failure(description: "socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        return addr
    }

    /// `bind` (`listen == true`) or `connect` of `fd` to `path`; 0 on success, -1 with `errno` set.
    public static func attach(_ fd: Int32, to path: String, listen: Bool) throws -> Int32 {
        var addr = try address(path)
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
                let size = socklen_t(MemoryLayout<sockaddr_un>.size)
                return listen ? Glibc.bind(fd, p, size) : Glibc.connect(fd, p, size)
            }
        }
    }

    /// A new stream socket connected to `path` (close-on-exec).
    /// - Throws: ``Failure`` naming the path and the system error (e.g. "No such file or directory").
    public static func connect(_ path: String) throws -> Int32 {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        // Each way out closes `fd` once: a second close of the number, after another thread got
        // it from socket() or open(), closed that thread's descriptor (seen: the daemon's own
        // listening socket, "listen: Bad file descriptor", after a restart found a stale socket).
        let rc: Int32
        do { rc = try attach(fd, to: path, listen: false) } catch { Glibc.close(fd); throw error }
        guard rc == 0 else {
            let e = String(cString: strerror(errno))
            Glibc.close(fd)
            throw Failure(description: "\(path): \(e)")
        }
        return fd
    }

    /// Whether something accepts connections at `path` (a live daemon).
    public static func isLive(_ path: String) -> Bool {
        guard let fd = try? connect(path) else { return false }
        Glibc.close(fd)
        return true
    }
}
