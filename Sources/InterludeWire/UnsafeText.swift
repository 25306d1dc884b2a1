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
        return Data(rewriting(text) { u in
            guard u.value >= 0x7F, mustEscape(u) else { return nil }
            let hex = String(u.value, radix: 16, uppercase: true)
            return "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        }.utf8)
    }

    /// `s` with each scalar for which `replacement` gives text replaced by that text, the others
    /// kept; `s` itself (no copy) when none is replaced. The one loop behind the log's, the CLI's
    /// and JSON output's escaping, each with its own replacements.
    public static func rewriting(_ s: String, _ replacement: (Unicode.Scalar) -> String?) -> String {
        guard s.unicodeScalars.contains(where: { replacement($0) != nil }) else { return s }
        var out = String.UnicodeScalarView()
        for u in s.unicodeScalars {
            if let r = replacement(u) { out.append(contentsOf: r.unicodeScalars) } else { out.append(u) }
        }
        return String(out)
    }

    /// `\u{HEX}`, how an escaped scalar is shown.
    public static func escaped(_ u: Unicode.Scalar) -> String { "\\u{" + String(u.value, radix: 16, uppercase: true) + "}" }
}
