import Foundation
@testable import InterludeStore
import Testing

/// One daemon per state folder (N15: two daemons on one folder would overwrite each other's rows;
/// A7: each would undo the other's ducks). The lock is `flock(2)`: held per open file, so a second
/// lock in this process is refused like another process's would be.
@Suite struct StateFolderLockTests {
    @Test func aSecondLockOnTheFolderIsRefusedNamingTheHolder() throws {
        let t = TemporaryFolder()
        defer { t.remove() }
        let first = try StateFolderLock(directory: t.storeDirectory)
        let written = try String(contentsOfFile: t.storeDirectory + "/" + StateFolderLock.fileName, encoding: .utf8)
        #expect(written == "\(getpid())\n")
        do {
            _ = try StateFolderLock(directory: t.storeDirectory)
            Issue.record("a second lock on a held folder was granted")
        } catch {
            #expect(error.code == .storeInUse)
            #expect(error.message.contains("pid \(getpid())") && error.message.contains(t.storeDirectory), "\(error.message)")
        }
        withExtendedLifetime(first) {}
    }

    @Test func theFolderIsFreeOnceTheHolderGoesAway() throws {
        let t = TemporaryFolder()
        defer { t.remove() }
        do { _ = try StateFolderLock(directory: t.storeDirectory) }  // taken and released at once
        let second = try StateFolderLock(directory: t.storeDirectory)
        #expect(second.directory == t.storeDirectory)
    }

    @Test func anotherFolderIsNotHeld() throws {
        let t = TemporaryFolder()
        defer { t.remove() }
        let a = try StateFolderLock(directory: t.path + "/a")
        let b = try StateFolderLock(directory: t.path + "/b")
        withExtendedLifetime((a, b)) {}
    }

    @Test func aSymbolicLinkAsTheLockFileIsRefusedAndItsTargetKept() throws {
        let t = TemporaryFolder()
        defer { t.remove() }
        try FileManager.default.createDirectory(atPath: t.storeDirectory, withIntermediateDirectories: true)
        let victim = t.path + "/victim"
        try "precious\n".write(toFile: victim, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: t.storeDirectory + "/" + StateFolderLock.fileName, withDestinationPath: victim)
        do {
            _ = try StateFolderLock(directory: t.storeDirectory)
            Issue.record("a symbolic link was taken as the lock file")
        } catch {
            #expect(error.code == .storeOpenFailed && error.message.contains("symbolic link"), "\(error)")
        }
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious\n")
    }

    @Test func aFolderThatCannotBeMadeIsStoreOpenFailed() throws {
        let t = TemporaryFolder()
        defer { t.remove() }
        try FileManager.default.createDirectory(atPath: t.path, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: t.path + "/file", contents: Data())
        #expect { _ = try StateFolderLock(directory: t.path + "/file/state") } throws: { error in
            (error as? StoreError)?.code == .storeOpenFailed
        }
    }
}
