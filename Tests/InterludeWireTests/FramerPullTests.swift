import Testing
import InterludeWire

/// The daemon's use of the framer (PROTOCOL.md "Limits"): bytes appended as they arrive, lines
/// taken one at a time, whole lines and pending bytes counted for the read-ahead bound.
@Suite struct FramerPullTests {
    @Test func linesComeOutOneAtATimeWithCounts() throws {
        var f = LineFramer()
        try f.append(Array("a\nbb\r\n\nccc".utf8))
        #expect(f.completeLines == 3)
        #expect(f.pendingBytes == 10)
        #expect(f.nextLine() == Array("a".utf8))
        #expect(f.nextLine() == Array("bb".utf8))
        #expect(f.completeLines == 1)
        #expect(f.nextLine() == [])  // an empty line is a line; the daemon skips it
        #expect(f.nextLine() == nil)
        #expect(f.pendingBytes == 3)
        try f.append(Array("c\n".utf8))
        #expect(f.nextLine() == Array("cccc".utf8))
        #expect(f.pendingBytes == 0)
    }

    /// Interleaved appends and takes in random splits give the lines in order, and the storage
    /// is compacted without losing a byte (an index moves; no removeFirst per line).
    @Test(arguments: 1...10) func interleavedRandomSplits(seed: Int) throws {
        var rng = SplitMix(seed: UInt64(seed) &* 7919)
        var lines: [[UInt8]] = []
        for i in 0..<400 { lines.append(Array("line \(i) ".utf8) + [UInt8](repeating: 0x61, count: Int(rng.next() % 3000))) }
        let all: [UInt8] = lines.flatMap { $0 + [0x0a] }
        var stream = all[...]
        var f = LineFramer()
        var out: [[UInt8]] = []
        while !stream.isEmpty || f.completeLines > 0 {
            let n = min(stream.count, Int(rng.next() % 20000))
            try f.append(stream.prefix(n))
            stream = stream.dropFirst(n)
            for _ in 0..<Int(rng.next() % 8) { if let l = f.nextLine() { out.append(l) } }
            if stream.isEmpty { while let l = f.nextLine() { out.append(l) } }
        }
        #expect(out == lines)
        #expect(f.pendingBytes == 0)
    }

    @Test func overflowIsFoundOnAppendEvenWhenEarlierLinesWait() {
        var f = LineFramer(maxLineBytes: 10)
        #expect(throws: LineFramer.Overflow.self) { try f.append(Array("ok\n".utf8) + [UInt8](repeating: 0x61, count: 11)) }
        var g = LineFramer(maxLineBytes: 10)
        let e = #expect(throws: LineFramer.Overflow.self) { try g.append(Array("ok\n".utf8) + [UInt8](repeating: 0x61, count: 12) + [0x0a]) }
        #expect(e?.bytes == 12)
    }
}
