import Foundation
import Testing
import InterludeMeasure
#if canImport(Glibc)
import Glibc
#endif

/// The books the torture suite keeps (README "Torture"): a row must fail when anything is lost,
/// duplicated or crashed, so these are checked on the shapes that must fail as well as pass.
@Suite struct ExitStatusTests {
    @Test func decodesExitAndSignal() {
        #expect(ExitStatus(raw: 0) == .exited(0))
        #expect(ExitStatus(raw: 78 << 8) == .exited(78))
        #expect(ExitStatus(raw: SIGKILL) == .signaled(SIGKILL))
        #expect(ExitStatus(raw: SIGSEGV | 0x80) == .signaled(SIGSEGV))  // core dumped bit
        #expect(ExitStatus(raw: 0x137f) == nil)  // stopped by SIGSTOP
        #expect(ExitStatus(raw: 0xffff) == nil)  // continued
    }

    @Test func crashIsAnyEndTheSuiteDidNotCause() {
        #expect(!ExitStatus.signaled(SIGKILL).isCrash(expected: .killed))
        #expect(ExitStatus.signaled(SIGILL).isCrash(expected: .killed))  // died before our SIGKILL
        #expect(ExitStatus.exited(0).isCrash(expected: .killed))
        #expect(!ExitStatus.exited(0).isCrash(expected: .terminated))
        #expect(ExitStatus.exited(1).isCrash(expected: .terminated))
        #expect(ExitStatus.signaled(SIGTERM).isCrash(expected: .terminated))  // no clean stop
        #expect(!ExitStatus.exited(78).isCrash(expected: .exitCode(78)))
        #expect(ExitStatus.signaled(SIGSEGV).isCrash(expected: .exitCode(78)))
        #expect(ExitStatus.exited(1).isCrash(expected: .exitCode(78)))
    }

    @Test func describesSignalsByName() {
        #expect(ExitStatus.signaled(SIGILL).description == "signal 4 (SIGILL)")
        #expect(ExitStatus.exited(78).description == "exit 78")
    }
}

@Suite struct DeliveryLedgerTests {
    @Test func acknowledgedAndListedOnceIsNeitherLostNorDuplicated() {
        var l = DeliveryLedger()
        l.acknowledge("a/1"); l.acknowledge("a/2")
        l.delivered("a/1"); l.delivered("a/2")
        l.check(scope: ["a/1", "a/2"], listed: ["a/1", "a/2", "a/3"])
        #expect(l.lost.isEmpty)
        #expect(l.duplicated.isEmpty)
    }

    @Test func acknowledgedButMissingIsLost() {
        var l = DeliveryLedger()
        l.acknowledge("a/1"); l.acknowledge("a/2")
        l.check(scope: ["a/1", "a/2"], listed: ["a/1"])
        #expect(l.lost == ["a/2"])
    }

    @Test func unacknowledgedMissingIsNotLost() {
        // A request the daemon was killed before answering may or may not have been saved.
        var l = DeliveryLedger()
        l.check(scope: ["a/1"], listed: [])
        #expect(l.lost.isEmpty)
    }

    @Test func deliveredTwiceOrListedTwiceIsDuplicated() {
        var l = DeliveryLedger()
        l.acknowledge("a/1"); l.acknowledge("a/2")
        l.delivered("a/1"); l.delivered("a/1")
        l.check(scope: ["a/1", "a/2"], listed: ["a/1", "a/2", "a/2"])
        #expect(l.duplicated == ["a/1", "a/2"])
        // A duplicate delivery of something never acknowledged still counts: the user saw it twice.
        l.delivered("b/9"); l.delivered("b/9")
        #expect(l.duplicated.contains("b/9"))
    }

    @Test func outsideTheScopeIsNotChecked() {
        var l = DeliveryLedger()
        l.acknowledge("a/1")
        l.check(scope: ["b/1"], listed: [])
        #expect(l.lost.isEmpty)
    }
}

@Suite struct TortureTableTests {
    @Test func aRowFailsOnLossesOrProblems() {
        #expect(TortureRow(name: "r", tried: "1", failed: 0, figures: "").ok)
        #expect(!TortureRow(name: "r", tried: "1", failed: 1, figures: "").ok)
        #expect(!TortureRow(name: "r", tried: "1", failed: 0, figures: "", problems: ["daemon crashed"]).ok)
    }

    @Test func tableEscapesPipesAndListsProblems() {
        let t = TortureRow.table([
            TortureRow(name: "a", tried: "2 | 3", failed: 0, figures: "p99 1 ms"),
            TortureRow(name: "b", tried: "1", failed: 1, figures: "x\ny", problems: ["lost a/1"]),
        ])
        let lines = t.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0] == "| row | tried | lost/failed | figures |")
        #expect(lines[2] == "| a | 2 \\| 3 | 0 | p99 1 ms |")
        #expect(lines[3] == "| b **FAILED** | 1 | 1 | x y |")
        #expect(lines.last == "- b: lost a/1")
    }
}

@Suite struct HostileFilesTests {
    @Test func wavHeaderIsCanonical() {
        let h = HostileFiles.wavHeader(dataBytes: 1_000_000_000)
        #expect(h.count == 44)
        #expect(Array(h[0..<4]) == Array("RIFF".utf8))
        #expect(Array(h[8..<16]) == Array("WAVEfmt ".utf8))
        #expect(Array(h[36..<40]) == Array("data".utf8))
        let data = h[40..<44].enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
        #expect(data == 1_000_000_000)
    }

    @Test func wavHoldsItsSamples() {
        let w = HostileFiles.wav(seconds: 0.5)
        #expect(w.count == 44 + 24000 * 2)
    }

    @Test func zipStartsAndEndsWithItsRecords() {
        let z = HostileFiles.zip(holding: "a.wav")
        #expect(Array(z[0..<4]) == [0x50, 0x4b, 0x03, 0x04])
        #expect(Array(z[(z.count - 22)..<(z.count - 18)]) == [0x50, 0x4b, 0x05, 0x06])
    }

    @Test func nestedConfigHasTheDepth() {
        let s = HostileFiles.nestedConfig(depth: 3)
        #expect(s == "{ audio: [[[]]] }\n")
    }
}

/// The bench's memory rows (README "Benchmarks", issue 9 item 4): resident memory split into what
/// the process wrote and the mapped files' pages, and which files those are.
@Suite struct ResidentMemoryTests {
    @Test func splitsResidentMemoryOfThisProcess() throws {
        let m = try #require(ProcStats.residentMemory(getpid()))
        #expect(m.anonymous > 0)
        #expect(m.files > 0)
        #expect(m.anonymous + m.files <= m.total + 4096)  // VmRSS is their sum (shmem included)
        // Writing 64 MiB of new heap shows up as anonymous memory, not as mapped files.
        let big = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 20, alignment: 4096)
        defer { big.deallocate() }
        for i in stride(from: 0, to: big.count, by: 4096) { big[i] = 1 }
        let after = try #require(ProcStats.residentMemory(getpid()))
        #expect(after.anonymous - m.anonymous >= 60 << 20)
    }

    @Test func namesTheLargestMappedFiles() {
        let files = ProcStats.largestMappedFiles(getpid(), count: 50)
        #expect(files.contains { $0.file.contains("libc.so") })
        #expect(zip(files, files.dropFirst()).allSatisfy { $0.bytes >= $1.bytes })
        #expect(ProcStats.largestMappedFiles(getpid(), count: 2).count == 2)
        #expect(ProcStats.residentMemory(-1) == nil && ProcStats.largestMappedFiles(-1, count: 3).isEmpty)
    }
}
