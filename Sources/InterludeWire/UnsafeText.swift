/// Which characters of an app's or a user's text are never written as they are to a log line or a
/// terminal (SECURITY.md: a title or an id must not forge a line, recolour the terminal or reorder
/// what follows): the C0 and C1 controls and DEL, the line and paragraph separators, the direction
/// marks and the bidirectional embeddings, overrides and isolates. The daemon's log
/// (`LogWriter.oneLine`) and the CLI (`CommandOutput.text`) show them escaped as `\u{…}`.
public enum UnsafeText {
    /// Whether `u` must be shown escaped.
    public static func mustEscape(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// `\u{HEX}`, how an escaped scalar is shown.
    public static func escaped(_ u: Unicode.Scalar) -> String { "\\u{" + String(u.value, radix: 16, uppercase: true) + "}" }
}
