import Glibc

/// One daemon's exclusive hold on a state folder: an `flock(2)` on `DIR/interlude.lock`, taken at
/// start before the folder is read, held until the process ends (the kernel drops it when the
/// process dies, SIGKILL too: nothing stale to clean up).
///
/// Two daemons on one state folder (different sockets, one `--state`) would each keep their own
/// notification state in memory and overwrite each other's rows (N15 "nothing acknowledged is
/// lost" would not hold), and each would undo the other's ducks as left over from an earlier run
/// (A7, `applied-gains.json`). So the second one refuses to start and says who holds the folder.
///
/// The file holds the holder's process id (decimal text) for that message; the lock, not the
/// text, is what counts.
public final class StateFolderLock: Sendable {
    /// The lock file's name inside the state folder.
    public static let fileName = "interlude.lock"

    /// The folder held.
    public let directory: String
    private let fd: Int32

    /// Creates the folder if needed (0700) and takes the lock without waiting.
    /// - Throws: `StoreError` with code `storeInUse` when another process (or another lock of this
    ///   one) holds the folder: the message names its process id and the folder;
    ///   `storeOpenFailed` when the folder or the lock file cannot be created or opened.
    public init(directory: String) throws(StoreError) {
        try StateFolder.make(directory)
        let path = StateFolder.path(of: Self.fileName, in: directory)
        // O_NOFOLLOW: a symbolic link planted as the lock file is refused, not followed (its target
        // would be truncated and written).
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            let why = errno == ELOOP ? "it is a symbolic link" : String(cString: strerror(errno))
            throw StoreError(.storeOpenFailed, "cannot open \(path): \(why)")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let failure = errno
            let holder = Self.readHolder(fd)
            Glibc.close(fd)
            guard failure == EWOULDBLOCK else {
                throw StoreError(.storeOpenFailed, "cannot lock \(path): \(String(cString: strerror(failure)))")
            }
            let who = holder.map { "pid \($0)" } ?? "another process"
            throw StoreError(.storeInUse, "the state in \(directory) is in use by \(who) (\(path) is locked); one daemon per state folder: stop the other or give this one its own --state")
        }
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        self.directory = directory
        self.fd = fd
    }

    deinit { Glibc.close(fd) }  // closing the last descriptor of the file releases the lock

    /// The process id written by the holder, if the file holds one.
    private static func readHolder(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        return Int32(String(decoding: buffer[..<n].filter { $0 >= 0x30 && $0 <= 0x39 }, as: UTF8.self))
    }
}

/// The state folder's files: where they are and the folder made for them. Shared by the lock and
/// the database (``NotificationStore``), which both live in `--state DIR`.
enum StateFolder {
    /// `DIR/name`, with or without a slash at the end of `directory`.
    static func path(of name: String, in directory: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// `mkdir -p` with 0700, in the system's words when it fails ("No such file or directory").
    /// - Throws: `StoreError` `storeOpenFailed`.
    static func make(_ directory: String) throws(StoreError) {
        var made = ""
        for part in directory.split(separator: "/", omittingEmptySubsequences: true) {
            made += (made.isEmpty && !directory.hasPrefix("/") ? "" : "/") + part
            if Glibc.mkdir(made, 0o700) != 0 && errno != EEXIST {
                throw StoreError(.storeOpenFailed, "cannot create the folder \(directory): \(made): \(String(cString: strerror(errno)))")
            }
        }
    }
}
