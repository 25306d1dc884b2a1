/// A bound on how deeply a JSON text nests arrays and objects, checked on the raw bytes before any
/// decoder sees them (PROTOCOL.md "Framing": at most ``JSONDepth/maximum`` levels).
///
/// Why before the decoder: Foundation's `JSONDecoder` traps (SIGILL) on its error path for text
/// nested about 512 deep, and the cost of decoding nested values into ``JSONValue`` and walking
/// them grows with the square of the depth (a 3 KB line nested 500 deep took 1.3 s of CPU). A
/// scan here is one pass over the bytes, with no allocation, that cannot trap.
public enum JSONDepth {
    /// The most levels of `[`/`{` a message may nest, the request object itself counting as one.
    /// Every method's params fit within 6 (userInfo is flat); 32 leaves room for what a later
    /// protocol version adds.
    public static let maximum = 32

    /// Too deep: the byte offset (0-based) of the bracket that went past the bound.
    public struct TooDeep: Error, Sendable, Equatable {
        public var offset: Int
        public var limit: Int
    }

    /// Checks that `bytes`, read as JSON, never nests deeper than `limit`. Brackets inside strings
    /// (with their escapes) do not count. It does not validate the JSON otherwise: the decoder that
    /// runs after it reports syntax errors.
    /// - Throws: ``TooDeep`` at the first bracket past `limit`.
    public static func check<C: Collection>(_ bytes: C, limit: Int = maximum) throws(TooDeep) where C.Element == UInt8 {
        var depth = 0
        var inString = false
        var escaped = false
        var offset = 0
        for b in bytes {
            defer { offset += 1 }
            if inString {
                if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch b {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > limit { throw TooDeep(offset: offset, limit: limit) }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                depth -= 1
            default: break
            }
        }
    }
}
