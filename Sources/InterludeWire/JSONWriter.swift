import Foundation

/// Writes a ``JSONValue`` as compact JSON text (RFC 8259), byte for byte as the protocol's
/// `JSONEncoder` (``WireCoding/encoder``: sorted keys, slashes not escaped) writes it (issue 9).
///
/// Every reply, event and stored row went through `JSONEncoder`: 23 % of the daemon's CPU under an
/// 8-client `notification.add` burst (perf, release build), most of it generic container plumbing.
/// Values are built with ``JSONValue/init(encoding:)`` (no text in between) and written here.
/// `WireWriterTests` checks the output against `JSONEncoder`'s for random values.
///
/// What it writes, as `JSONEncoder` does:
/// - object keys sorted by their UTF-8 bytes; no spaces;
/// - a whole number below 10^15 in magnitude as an integer (`3`, not `3.0`, as ``JSONValue``
///   encodes it), any other number as Swift's shortest round-tripping form with a trailing `.0`
///   dropped (`0.1`, `1e+20`);
/// - in strings, `"` and `\` escaped, `\b \f \n \r \t` by name, other control characters below
///   U+0020 as `\u00XX`; everything else, `/` included, as its UTF-8 bytes.
public enum JSONWriter {
    /// The JSON text of `value`.
    public static func data(_ value: JSONValue) -> Data {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        append(value, to: &out)
        return Data(out)
    }

    /// Appends the JSON text of `value` to `out`.
    public static func append(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case let .bool(b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case let .number(n): appendNumber(n, to: &out)
        case let .string(s): appendString(s, to: &out)
        case let .array(a):
            out.append(UInt8(ascii: "["))
            var first = true
            for v in a {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                append(v, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case let .object(o):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (k, v) in o.sorted(by: { keyPrecedes($0.key, $1.key) }) {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                appendString(k, to: &out)
                out.append(UInt8(ascii: ":"))
                append(v, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// The order of an object's keys as written: by their UTF-8 bytes (as `JSONEncoder`'s
    /// `.sortedKeys` writes them).
    static func keyPrecedes(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    static func appendNumber(_ n: Double, to out: inout [UInt8]) {
        if n.rounded() == n, abs(n) < 1e15 {
            out.append(contentsOf: String(Int64(n)).utf8)
            return
        }
        var s = n.description
        if s.hasSuffix(".0") { s.removeLast(2) }
        out.append(contentsOf: s.utf8)
    }

    private static let hex = Array("0123456789abcdef".utf8)

    static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            var start = 0
            for (i, b) in bytes.enumerated() where b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                out.append(contentsOf: bytes[start..<i])
                start = i + 1
                out.append(UInt8(ascii: "\\"))
                switch b {
                case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
                case 0x08: out.append(UInt8(ascii: "b"))
                case 0x0C: out.append(UInt8(ascii: "f"))
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                default:
                    out.append(contentsOf: "u00".utf8)
                    out.append(hex[Int(b >> 4)])
                    out.append(hex[Int(b & 0xF)])
                }
            }
            out.append(contentsOf: bytes[start...])
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension WireCoding {
    /// `value` as the protocol's JSON text: the same bytes as ``encoder`` writes, faster
    /// (``JSONValueEncoder/text(_:)``, written as ``JSONWriter`` writes values).
    /// - Throws: `EncodingError.invalidValue` for a non-finite number, as `JSONEncoder` does.
    public static func encode<T: Encodable>(_ value: T) throws -> Data {
        Data(try JSONValueEncoder.text(value))
    }
}
