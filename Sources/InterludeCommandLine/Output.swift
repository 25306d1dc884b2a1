import Foundation
import InterludePolicy
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// What `interlude` and `interlude-audio` print, the same way: errors on standard error prefixed
/// `interlude:`, events and replies as JSON lines, levels in dB with one decimal.
public enum CommandOutput {
    /// Prints `interlude: MESSAGE` on standard error and returns `code` (the exit status). The
    /// message may quote the user's arguments, a file's text or a path: it is printed as
    /// ``terminalLines(_:)`` makes it.
    public static func fail(_ message: String, code: Int32 = 1) -> Int32 {
        warn(message)
        return code
    }

    /// Prints `interlude: MESSAGE` on standard error (a warning, a note), as ``terminalLines(_:)``
    /// makes it.
    public static func warn(_ message: String) {
        write(Data("interlude: \(terminalLines(message))\n".utf8), to: STDERR_FILENO)
    }

    /// Writes all of `bytes` to `fd` (`STDOUT_FILENO`, `STDERR_FILENO`) at once, unbuffered. A
    /// reader that went away (EPIPE: `interlude push … | head -c 5`, where SIGPIPE is ignored)
    /// ends the process quietly with status 141, as SIGPIPE's default does for the other
    /// commands; `FileHandle.write` trapped there (SIGILL). Another error (a closed descriptor)
    /// drops the output.
    public static func write(_ bytes: Data, to fd: Int32) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { raw in Glibc.write(fd, raw.baseAddress! + done, raw.count - done) }
            if n > 0 { done += n; continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EPIPE { exit(128 + SIGPIPE) }
            return
        }
    }

    /// The exit status for an error a command threw: 2 for a usage error, 1 otherwise, with a
    /// message that for a daemon error starts with its stable code (PROTOCOL.md "Errors").
    public static func fail(_ error: any Error) -> Int32 {
        switch error {
        case let e as Arguments.UsageError: return fail(e.description, code: 2)
        // A daemon's message may quote an app's text (an identifier, an action): escaped as ``text(_:)``.
        case let e as WireError: return fail("\(e.code.rawValue): \(text(e.message))")
        default: return fail("\(error)")
        }
    }

    /// One value as one line of JSON on standard output (the wire encoding: sorted keys).
    public static func printJSONLine<T: Encodable>(_ v: T) {
        if let d = try? WireCoding.encode(v) {
            write(UnsafeText.jsonForTerminal(d) + Data([0x0a]), to: STDOUT_FILENO)
        }
    }

    /// Text an app or a player chose (a title, an identifier, a bus name), made safe to print on a
    /// terminal: control characters (a newline that would forge a line of its own, an escape
    /// sequence that would recolour or move the cursor, C1 controls) and the bidirectional
    /// overrides that reorder what follows are shown escaped (`\n`, `\u{1B}`), never sent to the
    /// terminal; so are the line and paragraph separators and the direction marks, as in the
    /// daemon's log (`LogWriter.oneLine`). A backslash is doubled, so that an identifier holding
    /// the two characters `\n` does not print like one holding a line break. Everything else
    /// (accents, emoji, joiners) is kept. JSON output escapes the same scalars the JSON way
    /// (`\u202E`, ``UnsafeText/jsonForTerminal(_:)``): the same values for a program, nothing
    /// that reorders or moves on a terminal.
    public static func text(_ s: String) -> String {
        UnsafeText.rewriting(s) { u in
            switch u.value {
            case 0x0A: "\\n"
            case 0x0D: "\\r"
            case 0x09: "\\t"
            case 0x5C: "\\\\"
            default: UnsafeText.mustEscape(u) ? UnsafeText.escaped(u) : nil
            }
        }
    }

    /// A message of the CLI's own as printed on standard error: it may quote the user's arguments
    /// (which a script may have taken from an app: an id, a title), a path or a file's text, so
    /// what ``UnsafeText/mustEscape(_:)`` names is shown escaped (`\u{1B}`, `\u{202E}`), except the
    /// message's own line breaks (the usage text after an error). Backslashes stay as they are, so
    /// text already escaped by ``text(_:)`` comes out the same: the user's values a message quotes
    /// (an unknown command, option or value) go through ``text(_:)`` where the message is made,
    /// so that a typed `\u{1B}` prints `\\u{1B}`, as on standard output, and not like a real ESC.
    public static func terminalLines(_ s: String) -> String {
        UnsafeText.rewriting(s) { u in u != "\n" && UnsafeText.mustEscape(u) ? UnsafeText.escaped(u) : nil }
    }

    /// A level or a duration with one decimal, as the CLI prints them ("-14.0").
    public static func fmt(_ d: Double) -> String { String(format: "%.1f", d) }

    /// What a person can read: outcome, level, sound, the rules that decided (N16), then one line
    /// per note; an app's text in it (the sound's name, a note) escaped as ``text(_:)`` does.
    public static func describe(_ d: NotificationDecision) -> String {
        var out: String
        switch d.outcome {
        case .delivered: out = "delivered"
        case let .held(until): out = "held" + (until.map { " until \(Date(timeIntervalSince1970: $0.secondsSince1970))" } ?? "")
        case .silenced: out = "delivered silently"
        case let .downgraded(from, to): out = "delivered, downgraded from \(name(from)) to \(name(to))"
        case let .rejected(code): out = "rejected (\(code.rawValue))"
        }
        out += ", level \(name(d.level))"
        if let s = d.sound {
            out += ", sound \(text(s.name)) at \(Int((s.volume * 100).rounded())) %"
            if s.bypassRingerAndFocus { out += " through ringer and focus" }
        } else {
            out += ", no sound"
        }
        if !d.banner { out += ", no banner" }
        if let b = d.badge { out += ", badge \(b)" }
        out += " — rules \(d.rules.joined(separator: ", "))"
        // One note a line; each note's own text escaped (a note may quote an app's identifier).
        if !d.notes.isEmpty { out += "\n  " + d.notes.map(text).joined(separator: "\n  ") }
        return out
    }

    /// The level as the protocol and the CLI spell it.
    public static func name(_ l: InterruptionLevel) -> String {
        switch l { case .passive: "passive"; case .active: "active"; case .timeSensitive: "timeSensitive"; case .critical: "critical" }
    }
}
