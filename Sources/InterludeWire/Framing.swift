/// Newline-delimited framing with a size cap (PROTOCOL.md "Framing").
///
/// Feed it bytes as they arrive, in any split; it returns whole lines (without the newline).
/// A line longer than `maxLineBytes` is an error: the caller replies `tooLarge` and closes.
public struct LineFramer: Sendable {
    /// The protocol's cap on one message, in bytes (64 KiB), newline excluded.
    public static let defaultMaxLineBytes = 64 * 1024
    public let maxLineBytes: Int
    private var buffer: [UInt8] = []
    /// Index in `buffer` up to which no newline was found yet (avoids rescanning).
    private var scanned = 0

    public init(maxLineBytes: Int = LineFramer.defaultMaxLineBytes) { self.maxLineBytes = maxLineBytes }

    public struct Overflow: Error, Sendable, Equatable { public var bytes: Int }

    /// Bytes received but not yet part of a whole line.
    public var pendingBytes: Int { buffer.count }

    /// Appends bytes and returns the whole lines they complete.
    /// - Throws: ``Overflow`` when a line exceeds the cap (the framer is then unusable).
    public mutating func feed<S: Sequence>(_ bytes: S) throws(Overflow) -> [[UInt8]] where S.Element == UInt8 {
        buffer.append(contentsOf: bytes)
        var lines: [[UInt8]] = []
        var start = 0
        var i = scanned
        while i < buffer.count {
            if buffer[i] == UInt8(ascii: "\n") {
                var line = Array(buffer[start..<i])
                // The cap counts every byte before the newline, a trailing CR included.
                if line.count > maxLineBytes { throw Overflow(bytes: line.count) }
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                lines.append(line)
                start = i + 1
            }
            i += 1
        }
        if start > 0 { buffer.removeFirst(start) }
        scanned = buffer.count
        if buffer.count > maxLineBytes { throw Overflow(bytes: buffer.count) }
        return lines
    }
}
