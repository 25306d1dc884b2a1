#if canImport(Glibc)
import Glibc
#endif

/// Newline-delimited framing with a size cap (PROTOCOL.md "Framing").
///
/// Feed it bytes as they arrive, in any split; it returns whole lines (without the newline).
/// A line longer than `maxLineBytes` is an error: the caller replies `tooLarge` and closes.
///
/// Two ways to use it: ``feed(_:)`` returns every line the bytes complete (the client library), or
/// ``append(_:)`` then ``nextLine()`` one line at a time (the daemon, which keeps unanswered
/// requests as raw bytes here and stops reading a connection while ``completeLines`` or
/// ``pendingBytes`` is over its bound: PROTOCOL.md "Limits"). Bytes handed out are dropped from the
/// front by moving an index; the storage is compacted only when at least half of it is consumed,
/// so the cost per byte is constant however large the buffer (no `removeFirst` per line).
public struct LineFramer: Sendable {
    /// The protocol's cap on one message, in bytes (64 KiB), newline excluded.
    public static let defaultMaxLineBytes = 64 * 1024
    public let maxLineBytes: Int
    private var buffer: [UInt8] = []
    /// Index of the first byte not yet handed out.
    private var head = 0
    /// Start of the line not yet terminated (for the cap), an index in `buffer`.
    private var lineStart = 0
    /// Whole lines in the buffer not yet handed out (empty lines included).
    public private(set) var completeLines = 0

    public init(maxLineBytes: Int = LineFramer.defaultMaxLineBytes) { self.maxLineBytes = maxLineBytes }

    public struct Overflow: Error, Sendable, Equatable { public var bytes: Int }

    /// Bytes received but not yet handed out as lines (whole lines waiting and the partial one).
    public var pendingBytes: Int { buffer.count - head }

    /// Appends bytes and checks the cap on every line they complete and on the unterminated rest.
    /// - Throws: ``Overflow`` when a line exceeds the cap (the framer is then unusable).
    public mutating func append<S: Sequence>(_ bytes: S) throws(Overflow) where S.Element == UInt8 {
        compact()
        let from = buffer.count
        buffer.append(contentsOf: bytes)
        var start = lineStart, lines = 0, tooLong = -1
        let cap = maxLineBytes
        buffer.withUnsafeBufferPointer { p in
            guard let base = p.baseAddress else { return }
            var i = from
            while i < p.count, let hit = memchr(base + i, 0x0a, p.count - i) {
                let nl = UnsafeRawPointer(hit) - UnsafeRawPointer(base)
                // The cap counts every byte before the newline, a trailing CR included.
                if nl - start > cap { tooLong = nl - start; return }
                lines += 1
                start = nl + 1
                i = nl + 1
            }
        }
        if tooLong >= 0 { throw Overflow(bytes: tooLong) }
        lineStart = start
        completeLines += lines
        if buffer.count - lineStart > maxLineBytes { throw Overflow(bytes: buffer.count - lineStart) }
    }

    /// The next whole line (without its newline and a CR before it), or nil when none is complete.
    public mutating func nextLine() -> [UInt8]? {
        guard completeLines > 0 else { return nil }
        let nl: Int = buffer.withUnsafeBufferPointer { p in
            let hit = memchr(p.baseAddress! + head, 0x0a, lineStart - head)!
            return UnsafeRawPointer(hit) - UnsafeRawPointer(p.baseAddress!)
        }
        var end = nl
        if end > head && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        let line = Array(buffer[head..<end])
        head = nl + 1
        completeLines -= 1
        return line
    }

    /// Appends bytes and returns the whole lines they complete.
    /// - Throws: ``Overflow`` when a line exceeds the cap (the framer is then unusable).
    public mutating func feed<S: Sequence>(_ bytes: S) throws(Overflow) -> [[UInt8]] where S.Element == UInt8 {
        try append(bytes)
        var lines: [[UInt8]] = []
        while let line = nextLine() { lines.append(line) }
        return lines
    }

    /// Drops the bytes already handed out once they are at least half of the storage (amortized
    /// constant cost per byte); frees a large storage once everything is handed out.
    private mutating func compact() {
        guard head > 0 else { return }
        if head == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 2 * LineFramer.defaultMaxLineBytes)
        } else if head * 2 >= buffer.count {
            buffer.removeFirst(head)
        } else {
            return
        }
        lineStart -= head
        head = 0
    }
}
