import Foundation
@testable import InterludeAudioPorts
import Testing

// A7 across a SIGKILL: the gains and mutes the daemon leaves on other apps' streams are in a file,
// so that the next run puts the user's volume back. Each test has a temporary folder of its own.
@Suite struct GainLedgerTests {
    /// A fresh temporary folder for one test; `remove()` deletes it.
    struct TemporaryFolder {
        let path = FileManager.default.temporaryDirectory.path + "/interlude-ledger-test-" + UUID().uuidString
        var ledger: String { path + "/applied-gains.json" }
        init() throws { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        func remove() { try? FileManager.default.removeItem(atPath: path) }
    }

    /// The entries the file holds now, read without a ledger (a ledger's `take` would rewrite it).
    static func saved(_ path: String) throws -> [String: GainLedger.Entry] {
        try JSONDecoder().decode([String: GainLedger.Entry].self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    static let unity: [UInt32] = [65536, 65536]
    static let minus6: [UInt32] = [52057, 52057]  // pa_sw_volume_from_dB(-6)

    @Test func A7_recordThenTakeGivesTheGainMuteAndUserVolumeOnce() throws {
        let tmp = try TemporaryFolder()
        defer { tmp.remove() }
        let ledger = GainLedger(path: tmp.ledger)
        #expect(ledger.count == 0)
        ledger.record(3, pid: 100, app: "music", gainDb: -14, muted: nil, user: Self.minus6)
        ledger.record(4, pid: 101, app: "video", gainDb: nil, muted: true)
        #expect(ledger.count == 2)

        let three = try #require(ledger.take(3, pid: 100, app: "music"))
        #expect(three == GainLedger.Entry(pid: 100, app: "music", gainDb: -14, muted: false, user: Self.minus6, keepsUser: true))
        let four = try #require(ledger.take(4, pid: 101, app: "video"))
        #expect(four == GainLedger.Entry(pid: 101, app: "video", gainDb: 0, muted: true, user: nil, keepsUser: true))
        // Taken means removed: a second take finds nothing, and neither does the file.
        #expect(ledger.take(3, pid: 100, app: "music") == nil)
        #expect(ledger.count == 0)
        #expect(try Self.saved(tmp.ledger).isEmpty)
    }

    @Test func A7_forgetDropsOneStreamAndForgetAllEveryStream() throws {
        let tmp = try TemporaryFolder()
        defer { tmp.remove() }
        let ledger = GainLedger(path: tmp.ledger)
        for index: UInt32 in 1...3 { ledger.record(index, pid: 100 + Int32(index), app: "app\(index)", gainDb: -14, muted: nil) }
        ledger.forget(2)
        #expect(ledger.count == 2)
        #expect(Set(try Self.saved(tmp.ledger).keys) == ["1", "3"])
        #expect(ledger.take(2, pid: 102, app: "app2") == nil)
        // The server went away with its streams: nothing of them may be "undone" on a new stream
        // that got the same index, pid and app (issue 7 hole 13).
        ledger.forgetAll()
        #expect(ledger.count == 0)
        #expect(try Self.saved(tmp.ledger).isEmpty)
        #expect(GainLedger(path: tmp.ledger).count == 0)
    }

    @Test func A7_whatOneRunRecordedIsReadByTheNext() throws {
        let tmp = try TemporaryFolder()
        defer { tmp.remove() }
        do {
            let killed = GainLedger(path: tmp.ledger)
            killed.record(7, pid: 4242, app: "music", gainDb: -14, muted: nil)
            killed.recordUser(7, Self.minus6)  // the adapter's report before its first write
            killed.record(8, pid: 4243, app: "radio", gainDb: -8, muted: true, user: Self.unity)
            // No stop, no flush: the process would be SIGKILLed here.
        }
        let next = GainLedger(path: tmp.ledger)
        #expect(next.count == 2)
        #expect(next.take(7, pid: 4242, app: "music")
                == GainLedger.Entry(pid: 4242, app: "music", gainDb: -14, muted: false, user: Self.minus6, keepsUser: true))
        #expect(next.take(8, pid: 4243, app: "radio")
                == GainLedger.Entry(pid: 4243, app: "radio", gainDb: -8, muted: true, user: Self.unity, keepsUser: true))
        // What the next run took is gone from the file too: a third run undoes nothing twice.
        #expect(GainLedger(path: tmp.ledger).count == 0)
    }

    @Test func A7_anEntryOfAnotherPidOrAppIsNotTakenAndIsDropped() throws {
        let tmp = try TemporaryFolder()
        defer { tmp.remove() }
        let ledger = GainLedger(path: tmp.ledger)
        ledger.record(5, pid: 100, app: "music", gainDb: -14, muted: true)
        ledger.record(6, pid: 100, app: "music", gainDb: -14, muted: nil)
        ledger.record(9, pid: nil, app: nil, gainDb: -14, muted: nil)
        // A restarted server gave the index to another process's stream, or to another app.
        #expect(ledger.take(5, pid: 101, app: "music") == nil)
        #expect(ledger.take(6, pid: 100, app: "video") == nil)
        #expect(ledger.take(9, pid: 100, app: nil) == nil)
        // Not kept for later either: the index now belongs to a stream the daemon never touched.
        #expect(ledger.count == 0)
        #expect(ledger.take(5, pid: 100, app: "music") == nil)
        #expect(try Self.saved(tmp.ledger).isEmpty)
    }

    @Test func A7_aStreamBackAt0dBAndUnmutedIsForgotten() throws {
        let tmp = try TemporaryFolder()
        defer { tmp.remove() }
        let ledger = GainLedger(path: tmp.ledger)
        ledger.record(1, pid: 100, app: "music", gainDb: -14, muted: nil)
        ledger.record(1, pid: 100, app: "music", gainDb: 0, muted: nil)
        #expect(ledger.count == 0)
        #expect(try Self.saved(tmp.ledger).isEmpty)

        // Muted at 0 dB is still something to undo; unmuted at −10 dB too.
        ledger.record(2, pid: 100, app: "music", gainDb: nil, muted: true)
        #expect(try Self.saved(tmp.ledger)["2"]?.muted == true)
        ledger.record(2, pid: 100, app: "music", gainDb: -10, muted: nil)
        ledger.record(2, pid: 100, app: "music", gainDb: nil, muted: false)
        let two = try #require(try Self.saved(tmp.ledger)["2"])
        #expect(two.gainDb == -10 && !two.muted)
        ledger.record(2, pid: 100, app: "music", gainDb: 0, muted: nil)
        #expect(ledger.count == 0)
        #expect(try Self.saved(tmp.ledger).isEmpty)

        // A user volume of a stream with nothing left on it adds nothing.
        ledger.recordUser(3, Self.unity)
        #expect(ledger.count == 0)
    }

    @Test func A7_aFileOfAnOlderVersionWithoutUserVolumesIsRead() throws {
        let tmp = try TemporaryFolder()
        defer { tmp.remove() }
        let old = #"{"12":{"app":"music","gainDb":-14,"muted":false,"pid":4242},"13":{"gainDb":0,"muted":true,"pid":17}}"#
        try Data(old.utf8).write(to: URL(fileURLWithPath: tmp.ledger))
        let ledger = GainLedger(path: tmp.ledger)
        #expect(ledger.count == 2)
        // No `user`, no `keepsUser`: the backend then divides the gain out, as those runs did.
        #expect(ledger.take(12, pid: 4242, app: "music")
                == GainLedger.Entry(pid: 4242, app: "music", gainDb: -14, muted: false, user: nil, keepsUser: nil))
        #expect(ledger.take(13, pid: 17, app: nil)
                == GainLedger.Entry(pid: 17, app: nil, gainDb: 0, muted: true, user: nil, keepsUser: nil))
    }

    @Test func A7_noFileOrAFileThatIsNotALedgerIsAnEmptyOne() throws {
        let tmp = try TemporaryFolder()
        defer { tmp.remove() }
        #expect(GainLedger(path: tmp.ledger).count == 0)  // no file yet
        try Data("{\"1\": [".utf8).write(to: URL(fileURLWithPath: tmp.ledger))
        let ledger = GainLedger(path: tmp.ledger)
        #expect(ledger.count == 0)
        ledger.record(1, pid: 1, app: "a", gainDb: -3, muted: nil)  // and it is written over
        #expect(GainLedger(path: tmp.ledger).count == 1)

        // No path: kept in memory for this run only.
        let memory = GainLedger(path: nil)
        memory.record(1, pid: 1, app: "a", gainDb: -3, muted: nil)
        #expect(memory.count == 1)
        #expect(memory.take(1, pid: 1, app: "a")?.gainDb == -3)
    }
}
