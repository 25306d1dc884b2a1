import Foundation

/// Which characters of an app's or a user's text are never written as they are to a log line or a
/// terminal (SECURITY.md: a title or an id must not forge a line, recolour the terminal or reorder
/// what follows): the C0 and C1 controls and DEL, the line and paragraph separators, the direction
/// marks (U+200E, U+200F and the Arabic letter mark U+061C) and the bidirectional embeddings,
/// overrides and isolates. The daemon's log
/// (`LogWriter.oneLine`) and the CLI (`CommandOutput.text`) show them escaped as `\u{…}`.
public enum UnsafeText {
    /// Whether `u` must be shown escaped.
    public static func mustEscape(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// JSON text made safe to print on a terminal, meaning the same JSON: every scalar that
    /// ``mustEscape(_:)`` names and JSON leaves as it is (DEL, the C1 controls, the direction marks
    /// and overrides, the line and paragraph separators; a JSON encoder escapes only those below
    /// U+0020) is written as a `\uXXXX` escape. In JSON text such a scalar can only stand inside a
    /// string, where the escape means the same scalar, so a program reading the output gets the
    /// same values. Text that is not UTF-8 is returned unchanged.
    public static func jsonForTerminal(_ data: Data) -> Data {
        guard data.contains(where: { $0 >= 0x7F }), let text = String(bytes: data, encoding: .utf8) else { return data }
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for u in text.unicodeScalars {
            if u.value >= 0x7F, mustEscape(u) {
                let hex = String(u.value, radix: 16, uppercase: true)
                out += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            } else {
                out.unicodeScalars.append(u)
            }
        }
        return Data(out.utf8)
    }

    /// `\u{HEX}`, how an escaped scalar is shown.
    public static func escaped(_ u: Unicode.Scalar) -> String { "\\u{" + String(u.value, radix: 16, uppercase: true) + "}" }
}
