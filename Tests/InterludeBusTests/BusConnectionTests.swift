import Foundation
@testable import InterludeBus
import InterludeTestSupport
import Synchronization
import Testing

/// `BusConnection`'s read source watches a descriptor of its own (a duplicate of sd-bus's), closed
/// only once the source is off it: sd-bus closes its own descriptor when the connection ends, and a
/// number closed under a live dispatch source can be reused by another file while libdispatch still
/// watches it (the daemon's strace showed libdispatch unregistering the bus's closed number after
/// each stop). These tests follow the duplicate by its socket's inode: another test's file that
/// gets the same number is not it.
@Suite(.serialized) struct BusConnectionTests {
    static func required() -> Bool {
        if PrivateBus.available { return true }
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            Issue.record("dbus-daemon missing: bus tests may not skip under CI")
        }
        return false
    }

    /// The inode of the file open at `fd`, or nil when nothing is.
    static func inode(_ fd: Int32) -> UInt? {
        var st = stat()
        return fstat(fd, &st) == 0 ? UInt(st.st_ino) : nil
    }

    /// Whether `fd` still holds the file with `inode`, waiting up to 5 s for it to be closed.
    static func stillOpen(_ fd: Int32, inode: UInt) -> Bool {
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            if Self.inode(fd) != inode { return false }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return true
    }

    @Test(.enabled(if: required()))
    func stopClosesTheWatchedDescriptorAfterItsSource() throws {
        let bus = try PrivateBus("busconn-stop")
        defer { bus.stop() }
        let connection = try BusConnection(address: bus.address)
        let lost = Mutex(0)
        connection.whenLost { lost.withLock { $0 += 1 } }
        connection.start()
        let fd = try #require(connection.watchedDescriptor)
        let inode = try #require(Self.inode(fd))
        connection.stop()
        #expect(connection.watchedDescriptor == nil)
        #expect(!Self.stillOpen(fd, inode: inode), "the watched duplicate \(fd) is still open after stop")
        #expect(lost.withLock { $0 } == 0, "our own stop is not the bus going away")
    }

    /// The bus goes away: sd-bus closes its descriptor by itself; the connection stops watching
    /// its duplicate (left open at its end, it would wake the queue for ever) and closes it.
    @Test(.enabled(if: required()))
    func theBusGoingAwayEndsTheWatch() throws {
        let bus = try PrivateBus("busconn-lost")
        let connection = try BusConnection(address: bus.address)
        let lost = Mutex(0)
        connection.whenLost { lost.withLock { $0 += 1 } }
        connection.start()
        defer { connection.stop() }
        let fd = try #require(connection.watchedDescriptor)
        let inode = try #require(Self.inode(fd))
        bus.stop()
        #expect(!Self.stillOpen(fd, inode: inode), "the watched duplicate \(fd) is still open after the bus went away")
        #expect(connection.watchedDescriptor == nil)
        #expect(lost.withLock { $0 } == 1, "whenLost is called once")
    }
}
